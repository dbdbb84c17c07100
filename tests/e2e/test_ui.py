"""Issue 28 item 3: ``omnireel ui`` in headless Chromium against the local stack (as the TTS page is tested).

The page is driven as a person would (type a prompt, click): a stage change shows without a reload, the image loads,
the MP4 plays in the page and its duration is frames / fps, a job is cancelled, the job list fills, a batch's counts
reach the end. Skipped without ``chromium`` (CI installs it)."""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from tests.support.chromium import CDP, CHROMIUM  # and the fixture `chromium` (tests/conftest.py's plugins)
from tests.support.stack import LocalStack, cli_command

from .helpers import wait_for

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")


@pytest.fixture(scope="module")
def ui(stack: LocalStack) -> Iterator[str]:
    """``omnireel ui --listen 127.0.0.1:0``: its URL; stopped (SIGTERM) at the end."""
    process = subprocess.Popen([*cli_command(), "ui", "--listen", "127.0.0.1:0"], env=stack.env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True).start()  # type: ignore[union-attr]
    try:

        def listening() -> str | bool:
            return next((x for x in lines if "http://127.0.0.1:" in x), None) or process.poll() is not None

        line = wait_for(listening, 60, "omnireel ui to listen")
        assert isinstance(line, str), process.stderr.read() if process.stderr else ""
        yield line.split(": ", 1)[1].split()[0]
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


def _status(url: str, path: str, headers: dict[str, str]) -> int:
    host, port = url.split("//")[1].rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_the_api_of_the_page_refuses_other_pages_and_other_hosts(ui: str) -> None:
    host = ui.split("//")[1].rstrip("/")
    assert _status(ui, "/api/info", {"Host": host}) == 403  # no page token
    assert _status(ui, "/api/info", {"Host": host, "X-Omnireel-Ui": "guess"}) == 403
    assert _status(ui, "/", {"Host": "attacker.example:80"}) == 421  # DNS rebinding: the page is not served


def test_the_page_submits_shows_stages_live_plays_the_video_cancels_lists_and_follows_a_batch(
    ui: str,
    chromium: str,
) -> None:
    async def main() -> dict[str, Any]:
        async with connect(chromium, max_size=None, open_timeout=10, close_timeout=2) as ws:
            cdp = CDP(ws)
            await cdp.call("Page.enable")
            await cdp.call("Page.navigate", url=ui)
            await cdp.wait_for("document.readyState === 'complete' && typeof window.omnireelUi === 'object'", 15)
            loaded_at = await cdp.eval("window.omnireelUi.loadedAt")
            found: dict[str, Any] = {}

            # Submit; the stages change in the page (polling, no reload) until the job succeeds.
            await cdp.eval("document.getElementById('prompt').value = 'a lighthouse at dusk'")
            await cdp.eval("document.getElementById('submit').click()", gesture=True)
            await cdp.wait_for("window.omnireelUi.statuses.includes('succeeded')", 120)
            found["statuses"] = await cdp.eval("window.omnireelUi.statuses")
            found["same_page"] = await cdp.eval("window.omnireelUi.loadedAt") == loaded_at
            found["stage_classes"] = await cdp.eval(
                "[...document.querySelectorAll('#stages li')].map(li => li.dataset.stage + ':' + li.className)"
            )
            # The image is shown, the MP4 loads and plays in the page.
            await cdp.wait_for("document.getElementById('image').complete && "
                               "document.getElementById('image').naturalWidth > 0", 30)  # fmt: skip
            found["image_width"] = await cdp.eval("document.getElementById('image').naturalWidth")
            await cdp.wait_for("window.omnireelUi.video && window.omnireelUi.video.duration > 0", 30)
            await cdp.eval("document.getElementById('video').play()", gesture=True)
            await cdp.wait_for("window.omnireelUi.video.played && document.getElementById('video').currentTime > 0", 30)
            found["video"] = json.loads(await cdp.eval("JSON.stringify(window.omnireelUi.video)"))
            # Issue 37 item 4: every stage reached, with how long it took (also one shorter than a poll); the MP4 at
            # its own aspect ratio; download links for what the job made; one column, no sideways scroll, at 420 px.
            found["stages"] = json.loads(await cdp.eval(
                "JSON.stringify([...document.querySelectorAll('#stages li')].map(li => [li.dataset.stage, "
                "li.className, li.querySelector('small') ? Number(li.querySelector('small').dataset.ms) : null]))"
            ))  # fmt: skip
            found["video_box"] = json.loads(await cdp.eval(
                "(() => { const v = document.getElementById('video'), r = v.getBoundingClientRect(); "
                "return JSON.stringify({width: r.width, height: r.height, vw: v.videoWidth, vh: v.videoHeight}); })()"
            ))  # fmt: skip
            found["downloads"] = json.loads(await cdp.eval(
                "JSON.stringify([...document.querySelectorAll('#downloads a')].map(a => [a.dataset.artifact, "
                "a.getAttribute('download')]))"
            ))  # fmt: skip
            found["disposition"] = await cdp.eval(
                "fetch(document.querySelector('#downloads a[data-artifact=video]').href)"
                ".then(r => r.status + ' ' + r.headers.get('content-disposition'))"
            )
            await cdp.wait_for("document.querySelector('#downloads a[data-artifact=event]') !== null", 30)
            found["event"] = json.loads(await cdp.eval(
                "fetch(document.querySelector('#downloads a[data-artifact=event]').href).then(r => r.text())"
            ))  # fmt: skip
            found["layout"] = {}
            for width in (420, 1000):
                await cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1,
                               mobile=False)  # fmt: skip
                found["layout"][width] = json.loads(await cdp.eval(
                    "(() => { const d = document.documentElement, form = document.querySelector('main > div'), "
                    "job = document.getElementById('job'); return JSON.stringify({scroll: d.scrollWidth, "
                    "client: d.clientWidth, formLeft: form.getBoundingClientRect().left, "
                    "jobLeft: job.getBoundingClientRect().left}); })()"
                ))  # fmt: skip
            await cdp.call("Emulation.clearDeviceMetricsOverride")

            # A second job, cancelled from the page.
            await cdp.eval("document.getElementById('prompt').value = 'cancel me from the page'")
            await cdp.eval("document.getElementById('submit').click()", gesture=True)
            await cdp.wait_for("window.omnireelUi.statuses.length > 0 && !document.getElementById('cancel').disabled",
                               30)  # fmt: skip
            await cdp.eval("document.getElementById('cancel').click()", gesture=True)
            await cdp.wait_for("window.omnireelUi.statuses.includes('cancelled')", 30)
            # The status may come from the page's own polling before the DELETE's answer (with its note) arrives.
            found["note"] = await cdp.wait_for("document.getElementById('job-note').textContent", 30)

            # The list shows both jobs; a batch's counts reach the end.
            await cdp.wait_for("document.querySelectorAll('#jobs tr').length >= 2", 30)
            await cdp.eval("document.getElementById('batch-prompts').value = 'a fox\\na hen'")
            await cdp.eval("document.getElementById('batch-submit').click()", gesture=True)
            await cdp.wait_for("document.getElementById('batch-status').textContent === 'completed'", 120)
            found["batch"] = await cdp.eval("document.getElementById('batch-counts').textContent")
            found["batch_counts"] = await cdp.eval("window.omnireelUi.batchCounts")
            found["errors"] = await cdp.eval("window.omnireelUi.errors")
            return found

    found = asyncio.run(main())
    assert found["same_page"] and found["statuses"][-1] == "succeeded" and len(found["statuses"]) >= 2, found
    assert "succeeded:done" in found["stage_classes"] and "rendering_video:done" in found["stage_classes"]
    assert found["image_width"] > 0
    video = found["video"]
    assert video["played"] and video["duration"] == pytest.approx(video["frames"] / video["fps"], abs=0.1), video
    assert found["note"]
    stages = {stage: (css, ms) for stage, css, ms in found["stages"]}
    for stage in ("accepted", "generating_image", "staging_video", "rendering_video"):
        css, ms = stages[stage]
        assert css == "done" and ms is not None and ms >= 0, found["stages"]
    box = found["video_box"]
    assert box["vw"] == 480 and box["vh"] == 320
    assert box["width"] / box["height"] == pytest.approx(480 / 320, rel=0.02), box  # not letterboxed in a square
    assert dict(found["downloads"]).keys() >= {"image", "video", "event"}
    assert found["event"]["event_type"] == "job.succeeded" and found["event"]["event_id"]
    assert all(name.endswith((".png", ".mp4", ".json")) for _, name in found["downloads"])
    assert found["disposition"].startswith("200 attachment;") and ".mp4" in found["disposition"]
    narrow, wide = found["layout"][420], found["layout"][1000]
    assert narrow["scroll"] <= narrow["client"], narrow  # nothing scrolls sideways at 420 px
    assert narrow["jobLeft"] == pytest.approx(narrow["formLeft"], abs=1), narrow  # one column
    assert wide["jobLeft"] > wide["formLeft"] + 200, wide  # two columns
    assert found["batch"].startswith("2/2 done: 2 succeeded") and found["batch_counts"][-1] == 2
    assert found["errors"] == []
