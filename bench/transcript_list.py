"""Transcript list: a run page over 100k stored rollouts, and scrolling the 1,000 rollouts
x 20 turns of one step, in headless Chromium against the app served by uvicorn.

Measured: first paint (navigation start -> the first rows on screen: the newest rows the
server renders, by Element Timing), list ready (-> the frame after the virtualised list drew
its own rows with data) and the frame intervals while scrolling the step (requestAnimationFrame deltas in
the page, with Chromium's frame-rate limit and vsync off, so a delta is what a frame cost
rather than a 60 Hz tick). Baseline in the same run: the same step with `?render=all`,
the feed as it was before the list was virtualised (every row whole in the DOM at once).
Targets: first paint <= 1 s and p95 frame <= 16 ms on the virtualised list."""

from __future__ import annotations

import os
import time
from typing import Any

ROLLOUTS = int(os.environ.get("ENVLAB_BENCH_ROLLOUTS", "100000"))  # smaller only to try the benchmark out
STEPS = ROLLOUTS // 1000  # 1,000 rollouts a step
BIG_STEP = STEPS  # the newest step: 20 turns a rollout (the others: 2)
TURNS = 20
LOADS = 5  # warm page loads per variant (after one cold load)
FRAMES = 600
SCROLL_PX = 180  # per frame: a fast fling, about 2.4 collapsed rows
VIEWPORT = {"width": 1280, "height": 900}
TARGET_FIRST_PAINT_MS = 1000
TARGET_FRAME_MS = 16
CHROMIUM = "/usr/bin/chromium"

# Two marks, in ms from navigation start: `visible`, the first rows on screen (the server's,
# by Element Timing on the first row, or the list's own); `ready`, the frame after the
# virtualised list (or the ?render=all feed) drew its rows with data.
FIRST_PAINT_PROBE = """
(() => {
  const marks = {visible: null, ready: null};
  window.__benchMarks = marks;
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) {
        if (e.identifier === 'rollout-row' && marks.visible === null) marks.visible = e.renderTime || e.loadTime;
      }
    }).observe({type: 'element', buffered: true});
  } catch (e) {}
  function check() {
    const box = document.getElementById('rollouts');
    if (box && box.dataset.ready === 'true' && box.querySelector('article.rollout')) {
      requestAnimationFrame(() => {
        marks.ready = performance.now();
        if (marks.visible === null || marks.visible > marks.ready) marks.visible = marks.ready;
        window.__benchFirstPaint = true;
      });
      return;
    }
    requestAnimationFrame(check);
  }
  requestAnimationFrame(check);
})();
"""

SCROLL = """
async ([frames, px]) => {
  const box = document.getElementById('rollouts');
  const deltas = [];
  let last = null, n = 0, direction = 1, maxRows = 0;
  return await new Promise(resolve => {
    function frame(ts) {
      if (last !== null) deltas.push(ts - last);
      last = ts;
      maxRows = Math.max(maxRows, box.querySelectorAll('article.rollout').length);
      if (n++ >= frames) {
        resolve({deltas, maxRows, scrollHeight: box.scrollHeight});
        return;
      }
      if (direction > 0 && box.scrollTop + box.clientHeight >= box.scrollHeight - 1) direction = -1;
      else if (direction < 0 && box.scrollTop <= 0) direction = 1;
      box.scrollTop += direction * px;
      requestAnimationFrame(frame);
    }
    requestAnimationFrame(frame);
  });
}
"""


def _messages(seq: int, turns: int) -> list[dict[str, Any]]:
    text = f"rollout {seq}: " + "the quick brown fox jumps over the lazy dog " * 4
    out: list[dict[str, Any]] = []
    for turn in range(turns):
        if turn % 2 == 0:
            out.append({
                "role": "assistant",
                "content": f"turn {turn}. {text}",
                "tool_calls": [{"type": "function", "function": {"name": "guess", "arguments": {"word": "crane"}}}],
            })
        else:
            out.append({"role": "tool", "name": "guess", "content": f"<result turn={turn}> {text}"})
    return out


def fill(run: Any) -> int:
    """ROLLOUTS rollouts over STEPS steps; BIG_STEP's have TURNS turns. Returns the last seq."""
    from webapp.runs.models import Rollout, Run, prompt_key

    per_step = ROLLOUTS // STEPS
    seq = 0
    batch: list[Rollout] = []
    for step in range(1, STEPS + 1):
        turns = TURNS if step == BIG_STEP else 2
        for i in range(per_step):
            seq += 1
            prompt = [{"role": "user", "content": f"Guess the word (row {i})."}]
            batch.append(
                Rollout(
                    run=run, seq=seq, step=step, env="wordle", seed=i, prompt_key=prompt_key("wordle", prompt, i),
                    prompt=prompt, messages=_messages(seq, turns),
                    rewards={"env_reward": 0.5, "format": 1.0, "length": -0.1}, reward=1.4, advantage=0.2,
                )
            )
            if len(batch) >= 2000:
                Rollout.objects.bulk_create(batch)
                batch = []
    Rollout.objects.bulk_create(batch)
    Run.objects.filter(pk=run.pk).update(last_seq=seq, step=STEPS, status=Run.Status.SUCCEEDED)
    return seq


def summary(values: list[float]) -> dict[str, float]:
    from bench.common import median, percentile

    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "max": round(max(values), 2) if values else float("nan"),
        "median": round(median(values), 2) if values else float("nan"),
    }


def _open(context: Any, url: str) -> Any:
    """A new page at `url`, once the list's first rows are painted (the probe's mark)."""
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url, wait_until="commit")
    try:
        page.wait_for_function("!!window.__benchFirstPaint", timeout=120_000, polling=50)
    except Exception:
        page.close()
        raise RuntimeError(f"{url}: the list never painted (page errors: {errors[:5]}, at {page.url})") from None
    return page


def _first_paint(context: Any, url: str) -> tuple[dict[str, float], int]:
    page = _open(context, url)
    try:
        marks = page.evaluate("window.__benchMarks")
        rows = page.eval_on_selector_all("#rollouts article.rollout", "els => els.length")
        return marks, rows
    finally:
        page.close()


def _scroll(context: Any, url: str) -> dict[str, Any]:
    page = _open(context, url)
    try:
        return page.evaluate(SCROLL, [FRAMES, SCROLL_PX])
    finally:
        page.close()


def measure_variant(context: Any, url: str) -> dict[str, Any]:
    cold, _ = _first_paint(context, url)
    visible, ready = [], []
    rows = 0
    for _ in range(LOADS):
        marks, rows = _first_paint(context, url)
        visible.append(marks["visible"])
        ready.append(marks["ready"])
    scrolled = _scroll(context, url)
    return {
        "cold_first_paint_ms": round(cold["visible"], 1),
        "cold_list_ready_ms": round(cold["ready"], 1),
        "first_paint_ms": summary(visible),
        "list_ready_ms": summary(ready),
        "rows_in_dom_at_first_paint": rows,
        "frame_ms": summary(scrolled["deltas"]),
        "frames": len(scrolled["deltas"]),
        "max_rows_in_dom_while_scrolling": scrolled["maxRows"],
        "scroll_height_px": scrolled["scrollHeight"],
    }


def main() -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.test import Client
    from playwright.sync_api import sync_playwright

    from tests.envs.servers import free_port
    from tests.support.processes import start_web
    from webapp.runs.models import Run

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # ORM calls beside Playwright's loop
    user = User.objects.create_user("bench-list", password="bench")
    run = Run.objects.create(owner=user, name="bench-list", config={}, model="demo:echo", max_steps=STEPS)
    started = time.monotonic()
    fill(run)
    fill_seconds = time.monotonic() - started
    login = Client(HTTP_HOST="127.0.0.1")
    login.force_login(user)
    cookie = login.cookies["sessionid"].value
    port = free_port()
    # DEBUG is off, as in `make run`: whitenoise serves the collected files, collected
    # into the bench's own folder (the server's VAR_DIR, whose STATIC_ROOT it reads).
    from django.conf import settings
    from django.core.management import call_command

    from bench.common import BENCH_DIR

    settings.STATIC_ROOT = str(BENCH_DIR / "staticfiles")
    call_command("collectstatic", "--noinput", "--clear", verbosity=0)
    web = start_web(port, DJANGO_SETTINGS_MODULE="webapp.settings.local", ENVLAB_VAR_DIR=str(BENCH_DIR))
    base = f"http://127.0.0.1:{port}"
    pages = {
        "run_page": f"{base}/runs/{run.pk}/",
        "step_virtual": f"{base}/runs/{run.pk}/?step={BIG_STEP}",
        "step_render_all": f"{base}/runs/{run.pk}/?step={BIG_STEP}&render=all",
    }
    results: dict[str, Any] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-frame-rate-limit", "--disable-gpu-vsync",
                ],
            )
            context = browser.new_context(viewport=VIEWPORT)
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
            context.add_init_script(FIRST_PAINT_PROBE)
            for name, url in pages.items():
                print(f"   measuring {name}", flush=True)
                results[name] = measure_variant(context, url)
            browser.close()
    finally:
        web.stop()
    virtual, baseline, whole = results["step_virtual"], results["step_render_all"], results["run_page"]
    paint_ok = max(whole["first_paint_ms"]["median"], virtual["first_paint_ms"]["median"]) <= TARGET_FIRST_PAINT_MS
    frame_ok = virtual["frame_ms"]["p95"] <= TARGET_FRAME_MS
    return {
        "benchmark": "transcript_list",
        "rollouts": ROLLOUTS,
        "steps": STEPS,
        "step_rollouts": ROLLOUTS // STEPS,
        "turns": TURNS,
        "loads": LOADS,
        "scroll_px_per_frame": SCROLL_PX,
        "fill_seconds": round(fill_seconds, 1),
        "run_page": whole,
        "step_virtual": virtual,
        "step_render_all": baseline,
        "first_paint_ratio": round(baseline["first_paint_ms"]["median"] / virtual["first_paint_ms"]["median"], 1),
        "list_ready_ratio": round(baseline["list_ready_ms"]["median"] / virtual["list_ready_ms"]["median"], 1),
        "frame_p95_ratio": round(baseline["frame_ms"]["p95"] / virtual["frame_ms"]["p95"], 1),
        "target_first_paint_ms": TARGET_FIRST_PAINT_MS,
        "target_frame_ms": TARGET_FRAME_MS,
        "pass": paint_ok and frame_ok,
    }
