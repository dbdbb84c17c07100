"""The JSON body of the /v1/images/generations request (ImageGenerationRequest); its twin is ``video_request``."""

from __future__ import annotations

from typing import Any

from omnireel.jobs.request import JobRequest


def image_request_body(request: JobRequest, model_id: str | None) -> dict[str, Any]:
    """The /v1/images/generations JSON body (ImageGenerationRequest)."""
    body: dict[str, Any] = {
        "prompt": request.prompt,
        "size": request.image.size,
        "num_inference_steps": request.image.num_inference_steps,
        "guidance_scale": request.guidance_scale,
        "response_format": "b64_json",
        "output_format": "png",
    }
    if model_id:
        body["model"] = model_id
    if request.seed is not None:
        body["seed"] = request.seed
    if request.negative_prompt:
        body["negative_prompt"] = request.negative_prompt
    return body
