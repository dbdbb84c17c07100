"""The multipart/form-data body of the /v1/videos/sync request, staged in S3 for the async endpoint."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from urllib3.filepost import encode_multipart_formdata

from omnireel.jobs.request import JobRequest
from omnireel.media.reference_image import VideoReference


@dataclass(frozen=True)
class VideoRequestBody:
    body: bytes
    content_type: str  # multipart/form-data; boundary=...


def video_form_fields(request: JobRequest, reference: VideoReference, model_id: str | None) -> list[tuple[str, str]]:
    """Every text part, in the order the container reads them; optional fields only when set.

    The motion prompt (``video.prompt``) and ``video.negative_prompt`` replace the job's own for this call only.
    """
    video = request.video
    negative_prompt = video.negative_prompt or request.negative_prompt
    fields: list[tuple[str, str]] = []
    if model_id:
        fields.append(("model", model_id))
    fields += [
        ("prompt", video.prompt or request.prompt),
        ("image_reference", reference.part_text),
        ("width", str(video.width)),
        ("height", str(video.height)),
        ("num_frames", str(video.num_frames)),
        ("fps", str(video.fps)),
        ("num_inference_steps", str(video.num_inference_steps)),
        ("guidance_scale", str(request.guidance_scale)),
    ]
    if request.seed is not None:
        fields.append(("seed", str(request.seed)))
    if negative_prompt:
        fields.append(("negative_prompt", negative_prompt))
    return fields


def build_video_request(
    request: JobRequest, reference: VideoReference, *, model_id: str | None = None, boundary: str | None = None
) -> VideoRequestBody:
    """Encode the form with urllib3 (botocore's HTTP library, so already loaded; text parts only: no filename, so no
    file parts). The bytes are requests-toolbelt's, which this used to import along with all of requests
    (``tests/unit/media/test_video_request_contract.py`` compares the two)."""
    body, content_type = encode_multipart_formdata(
        video_form_fields(request, reference, model_id), boundary=boundary or f"omnireel-{uuid.uuid4().hex}"
    )
    return VideoRequestBody(body=body, content_type=content_type)
