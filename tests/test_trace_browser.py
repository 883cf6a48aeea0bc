"""The trace page in a real browser: Debian's Chromium, headless, driven by Playwright for Python.

The page of the tiny GPT loads with no console error; the keyboard steps through every
operation forward (→) and back again (←), the counter follows, and the equation and
code panes change where the routine and the call site do; `r` jumps from a forward to
the backward that reverses it; a screenshot is saved (TRACE_SCREENSHOT_DIR keeps it).
`.ci/run` installs the browser (apt) and playwright (pip); the system browser is used,
never `playwright install` (no network). Where neither can be had, the test skips and
says why.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from minitransformer.trace import traced_step, write_page

CHROMIUM = next((p for p in (shutil.which("chromium"), "/usr/bin/chromium") if p and Path(p).is_file()), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if CHROMIUM is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium; .ci/run does it as root)")
    folder = tmp_path_factory.mktemp("trace_page")
    path = folder / "trace.html"
    write_page(traced_step("gpt"), path)
    with sync_api.sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=FLAGS, headless=True,
                                                       viewport={"width": 1440, "height": 900})
        page = context.new_page()
        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: errors.append(f"fetched {r.url}") if not r.url.startswith("file:") else None)
        page.goto(path.as_uri())
        page.wait_for_selector("main .stephead")
        yield page, errors, folder
        context.close()


def _state(page) -> dict:
    return page.evaluate("""() => ({
        count: document.querySelector("nav .count").textContent,
        op: document.querySelector("main .stephead .op").textContent,
        equation: document.querySelector("main .equation").innerHTML,
        code: document.querySelector("section.code").textContent,
        maps: document.querySelectorAll("main canvas.hm").length,
        labelled: [...document.querySelectorAll("main canvas.hm")].map(c => c.dataset.labels),
        site: document.querySelector("main .links").textContent })""")


def test_the_page_steps_through_every_operation_with_the_keyboard(browser_page):
    page, errors, folder = browser_page
    n = int(_state(page)["count"].split("/")[-1])
    seen = [_state(page)]
    for k in range(2, n + 1):                                      # forward through every step
        page.keyboard.press("ArrowRight")
        seen.append(_state(page))
        assert seen[-1]["count"].endswith(f"step {k} / {n}"), seen[-1]["count"]
    assert seen[0]["count"].startswith("forward") and seen[-1]["count"].startswith("backward")
    for a, b in zip(seen, seen[1:]):
        if a["op"] != b["op"]:
            assert a["equation"] != b["equation"], (a["op"], b["op"])
        if a["site"].split("·")[1] != b["site"].split("·")[1]:
            assert a["code"] != b["code"], (a["op"], b["op"])
    assert sum(s["maps"] > 0 for s in seen) > n * 0.9                 # nearly every step draws its values
    for k in range(n - 1, 0, -1):                                  # and back again
        page.keyboard.press("ArrowLeft")
        state = _state(page)
        assert state["count"].endswith(f"step {k} / {n}") and state["op"] == seen[k - 1]["op"]
    assert errors == []


def test_r_jumps_between_a_forward_and_its_backward_and_a_screenshot_is_saved(browser_page):
    page, errors, folder = browser_page
    page.keyboard.press("Home")
    while "attention_forward" not in _state(page)["op"]:
        page.keyboard.press("ArrowRight")
    assert "25,25" in _state(page)["labelled"]                           # P: query and key tokens on its axes
    page.keyboard.press("r")
    assert _state(page)["op"] == "attention_backward" and _state(page)["count"].startswith("backward")
    shot = Path(os.environ.get("TRACE_SCREENSHOT_DIR", folder)) / "trace_attention_backward.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 20_000 and errors == []
