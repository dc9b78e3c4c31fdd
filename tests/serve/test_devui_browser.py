"""The dev page in a real browser: Playwright driving the system Chromium against a live server on loopback that
serves the scripted travel agent (its booking waits for approval), a failing agent and a supervisor team.

Playwright's sync API, in the test's thread (the server runs on uvicorn in its own thread); no test sleeps: each
waits for what the page shows. Each scenario saves a screenshot under the test's artifact directory
(``PYEINO_TEST_ARTIFACTS``, else pytest's tmp directory); ``PYEINO_DEVUI_SCREENSHOT=docs/devui.png`` also writes
the README's screenshot. Skipped when Chromium (``PYEINO_CHROMIUM``, default ``/usr/bin/chromium``) or Playwright
is missing, unless ``PYEINO_REQUIRE_BROWSER`` is set (CI sets it, and installs both).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adk.serve import create_app
from tests.serve.devui_app import Gate, broken_agent, lead_agent, travel_agent
from tests.serve.helpers import Live, live_server

CHROMIUM = Path(os.environ.get("PYEINO_CHROMIUM", "/usr/bin/chromium"))
if os.environ.get("PYEINO_REQUIRE_BROWSER"):  # CI: a missing browser is a failure, not a skip
    import playwright.sync_api as sync_api

    assert CHROMIUM.exists(), f"PYEINO_REQUIRE_BROWSER is set but there is no Chromium at {CHROMIUM}"
else:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need playwright (the test extra)")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)", allow_module_level=True)

expect = sync_api.expect
Page = sync_api.Page

pytestmark = pytest.mark.browser

TASK = "帮我安排明天的杭州一日游，我喜欢喝茶和吃小吃，告诉我带什么。"
FINAL = "明天杭州一日游安排"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        args = ["--no-sandbox"] if hasattr(os, "getuid") and os.getuid() == 0 else []
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=args)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.open()


@pytest.fixture
def live(gate: Gate) -> Iterator[Live]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from supervisor import build as team

    agents = {"travel_agent": travel_agent(gate), "broken": broken_agent(), "team": team(), "lead": lead_agent()}
    app = create_app(agents, dev_ui=True)
    with live_server(app) as server:
        yield server
        gate.open()
        assert app.state.tracker.wait_idle(10)


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = os.environ.get("PYEINO_TEST_ARTIFACTS")
    if not root:
        return tmp_path
    out = Path(root) / "devui"
    out.mkdir(parents=True, exist_ok=True)
    return out


def new_page(browser: Any, width: int = 1280, height: int = 800) -> tuple[Any, Page, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    return context, page, errors


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    context, page, errors = new_page(browser)
    yield page
    context.close()
    assert errors == []


def shot(page: Page, artifacts: Path, name: str, *, full_page: bool = False) -> Path:
    path = artifacts / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def open_page(page: Page, live: Live, agent: str = "travel_agent") -> None:
    page.goto(f"{live.url}/#agent={agent}")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def send(page: Page, text: str) -> None:
    page.locator("#input").fill(text)
    page.locator("#input").press("Enter")


def wait_for_approval(page: Page) -> Any:
    card = page.locator(".approval")
    expect(card).to_be_visible()
    expect(card.locator("h3")).to_have_text("Approve the call of book_tea_tasting?")
    return card


def event_types(page: Page) -> list[str]:
    types: list[str] = page.evaluate("devui.events.map(e => e.type)")
    return types


def test_the_answer_streams_in_parts_with_tool_calls_and_every_event(
    page: Page, live: Live, gate: Gate, artifacts: Path
) -> None:
    gate.close()
    open_page(page, live)
    send(page, TASK)
    # the first answer is held at the gate after its first chunk: the page shows it in part, the run is not over
    streaming = page.locator(".msg.assistant.streaming .text")
    expect(streaming).to_have_text("先查明天杭州")
    assert "RUN_FINISHED" not in event_types(page)
    expect(page.locator("#events [data-type=TEXT_MESSAGE_CONTENT]")).to_have_count(1)
    shot(page, artifacts, "streaming")
    gate.open()
    wait_for_approval(page)
    expect(page.locator(".msg.assistant").first).to_have_text(re.compile("先查明天杭州的天气。"))
    partials: list[str] = page.evaluate("devui.textLog")
    assert partials[:2] == ["先查明天杭州", "先查明天杭州的天气。"]
    # the tool calls with their arguments and results
    weather = page.locator(".tool", has_text="get_weather")
    expect(weather.locator(".args")).to_contain_text('"city": "杭州"')
    expect(weather.locator(".result")).not_to_be_empty()
    expect(weather.locator(".status")).to_have_text("done")
    # every event of the run listed, each with its time since the run started
    types = event_types(page)
    rows = page.locator("#events li[data-type]")
    expect(rows).to_have_count(len(types))
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    for kind in ("STATE_SNAPSHOT", "STEP_STARTED", "TEXT_MESSAGE_START", "TOOL_CALL_ARGS", "TOOL_CALL_RESULT"):
        assert kind in types
    assert re.fullmatch(r"\+\d+ ms", rows.first.locator(".t").inner_text())
    rows.nth(0).locator("summary").click()
    expect(rows.nth(0).locator("pre")).to_contain_text('"type": "RUN_STARTED"')
    shot(page, artifacts, "events")


def test_approve_with_edited_arguments_finishes_the_run(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live)
    send(page, TASK)
    card = wait_for_approval(page)
    args = card.locator("textarea.args")
    expect(args).to_have_value(re.compile(r'"place": "中国茶叶博物馆",\s+"time": "15:00"'))
    expect(card.locator(".approve")).to_be_focused()
    expect(page.locator("#send")).to_be_disabled()
    args.fill(args.input_value().replace("15:00", "16:30"))
    path = shot(page, artifacts, "approval")
    readme_shot = os.environ.get("PYEINO_DEVUI_SCREENSHOT")
    if readme_shot:
        shutil.copyfile(path, readme_shot)
    card.locator(".approve").click()
    booked = page.locator('.tool[data-call="call_book"]')
    expect(booked.locator(".result")).to_contain_text('"time": "16:30"')
    expect(booked.locator(".result")).to_contain_text("TEA-0427")
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    expect(page.locator(".approval")).to_have_count(0)
    # the call shows the arguments it ran with (the resume's snapshot of the thread has it as the model made it)
    expect(booked.locator(".args")).to_contain_text('"time": "16:30"')
    expect(booked.locator(".args-label")).to_have_text("arguments (edited on approval)")
    assert "16:30" in page.evaluate("devui.messages.flatMap(m => m.toolCalls || []).at(-1).function.arguments")
    # the session value the booking wrote, as STATE_DELTA told the page
    expect(page.locator("#state")).to_contain_text('"time": "16:30"')
    assert page.evaluate("devui.state.booking.ticket") == "TEA-0427"
    expect(page.locator("#input")).to_be_focused()
    shot(page, artifacts, "approved")


@pytest.mark.parametrize("then", ["approve", "reject"])
def test_a_refused_approval_keeps_its_card_and_the_thread_goes_on(
    page: Page, live: Live, artifacts: Path, then: str
) -> None:
    # edited arguments that break the tool's schema (no "time"): the resume fails and the run stays paused
    open_page(page, live)
    send(page, TASK)
    card = wait_for_approval(page)
    card.locator("textarea.args").fill('{"place": "中国茶叶博物馆"}')
    card.locator(".approve").click()
    expect(page.locator(".error[role=alert]")).to_contain_text("book_tea_tasting")
    # the card comes back with the error, the typed arguments kept; the call shows what the thread holds
    card = wait_for_approval(page)
    expect(card.locator(".invalid")).to_be_visible()
    expect(card.locator(".invalid")).to_contain_text("Not resumed")
    expect(card.locator(".invalid")).to_contain_text("'time'")
    expect(card.locator("textarea.args")).to_have_value('{"place": "中国茶叶博物馆"}')
    expect(card.locator(".approve")).to_be_focused()
    expect(page.locator("#send")).to_be_disabled()
    booked = page.locator('.tool[data-call="call_book"]')
    expect(booked.locator(".args")).to_contain_text('"time": "15:00"')
    expect(booked.locator(".args-label")).to_have_text("arguments")
    shot(page, artifacts, f"refused-{then}")
    # a corrected approval, or a rejection, goes through on the same paused run
    if then == "approve":
        card.locator("textarea.args").fill('{"place": "中国茶叶博物馆", "time": "16:30"}')
        card.locator(".approve").click()
        expect(booked.locator(".result")).to_contain_text('"time": "16:30"')
        expect(booked.locator(".args")).to_contain_text('"time": "16:30"')
    else:
        card.locator(".reject").click()
        expect(booked.locator(".status")).to_have_text("rejected")
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    expect(page.locator(".approval")).to_have_count(0)
    expect(page.locator("#events [data-type=RUN_FINISHED]")).to_have_count(2)  # the resume's end has arrived
    assert event_types(page)[-1] == "RUN_FINISHED"
    # and the thread takes the next message
    send(page, "谢谢")
    expect(page.locator("#events [data-type=RUN_FINISHED]")).to_have_count(3)
    assert event_types(page)[-1] == "RUN_FINISHED"
    expect(page.locator(".msg.user").last).to_have_text(re.compile("谢谢"))
    expect(page.locator(".error[role=alert]")).to_have_count(0)
    assert "InterruptPendingError" not in page.locator("#messages").inner_text()


def test_reject_with_the_keyboard_ends_with_the_rejection(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live)
    page.keyboard.press("Tab")  # focus moves through the header first; the composer is reachable by Tab
    page.locator("#input").focus()
    page.keyboard.type("Plan my day")
    page.keyboard.press("Enter")
    wait_for_approval(page)
    expect(page.locator(".approval .approve")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator(".approval .reject")).to_be_focused()
    page.keyboard.press("Enter")
    booked = page.locator('.tool[data-call="call_book"]')
    expect(booked.locator(".status")).to_have_text("rejected")
    expect(booked.locator(".result")).to_contain_text(
        "The call to tool 'book_tea_tasting' was rejected by the user and was not executed"
    )
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    expect(page.locator("#events [data-type=RUN_FINISHED]")).to_have_count(2)  # the resume's end has arrived
    assert event_types(page)[-1] == "RUN_FINISHED"
    assert "booking" not in page.evaluate("devui.state")
    shot(page, artifacts, "rejected")


def test_the_graph_is_drawn_and_follows_the_run(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live)
    graph = page.locator("#graph-box svg[data-graph]")
    expect(graph).to_be_visible()
    ids = graph.locator("[data-node]").evaluate_all("nodes => nodes.map(n => n.dataset.node)")
    assert set(ids) == {"start", "BeforeAgent", "ChatModel", "ToolNode", "ToolNodeToEndConverter", "end"}
    assert graph.locator("path.edge").count() == 7
    expect(page.locator("#tree-box")).to_be_hidden()  # one agent: no tree
    send(page, TASK)
    wait_for_approval(page)
    # paused in the tools node: it is the active one
    expect(graph.locator(".node.active")).to_have_attribute("data-node", "ToolNode")
    log: list[str] = page.evaluate("devui.activeLog")
    assert [entry.removeprefix("travel_agent:") for entry in log[:4]] == ["start", "ChatModel", "ToolNode", "ChatModel"]
    shot(page, artifacts, "graph-paused")
    page.locator(".approval .approve").click()
    expect(graph.locator(".node.active")).to_have_attribute("data-node", "end")
    shot(page, artifacts, "graph-finished")


def test_the_tree_of_agents_follows_the_agent_the_run_is_in(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live, "team")
    tree = page.locator("#tree-box svg[data-tree]")
    expect(tree).to_be_visible()
    names = tree.locator("[data-agent]").evaluate_all("nodes => nodes.map(n => n.dataset.agent)")
    assert names == ["supervisor", "researcher", "writer"]
    expect(page.locator("#graph-agent")).to_have_text("· supervisor")
    send(page, "Write me a note about tomorrow's weather")
    expect(page.locator("#events [data-type=RUN_FINISHED]")).to_have_count(1)
    expect(page.locator(".msg.assistant").last).to_contain_text("Done: the note is written")
    agents = [entry.split(":")[0] for entry in page.evaluate("devui.activeLog")]
    assert [a for i, a in enumerate(agents) if i == 0 or agents[i - 1] != a] == [
        "supervisor",
        "researcher",
        "supervisor",
        "writer",
        "supervisor",
    ]
    expect(tree.locator(".node.active")).to_have_attribute("data-agent", "supervisor")
    shot(page, artifacts, "team")


def test_an_agent_tool_s_agent_is_shown_while_it_runs(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live, "lead")
    tree = page.locator("#tree-box svg[data-tree]")
    names = tree.locator("[data-agent]").evaluate_all("nodes => nodes.map(n => n.dataset.agent)")
    assert names == ["lead", "helper"]
    send(page, "Do I need an umbrella?")
    expect(page.locator(".msg.assistant").last).to_contain_text("Take an umbrella")
    expect(page.locator(".msg.assistant", has_text="Hangzhou: light rain.").locator(".who")).to_have_text("helper")
    agents = [entry.split(":")[0] for entry in page.evaluate("devui.activeLog")]
    assert [a for i, a in enumerate(agents) if i == 0 or agents[i - 1] != a] == ["lead", "helper", "lead"]
    expect(page.locator('.tool[data-call="h1"] .result')).to_contain_text("Hangzhou: light rain.")
    shot(page, artifacts, "agent-tool")


def test_reload_reopens_the_thread_and_threads_can_be_deleted(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live)
    send(page, TASK)
    wait_for_approval(page)
    thread = page.evaluate("devui.threadId")
    # reloaded while paused: the pending approval comes back with the call's arguments
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    assert page.evaluate("devui.threadId") == thread
    card = wait_for_approval(page)
    expect(card.locator("textarea.args")).to_have_value(re.compile('"time": "15:00"'))
    card.locator(".approve").click()
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator(".msg.user")).to_have_text(re.compile(re.escape(TASK)))
    expect(page.locator('.tool[data-call="call_book"] .result')).to_contain_text("TEA-0427")
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    expect(page.locator("#state")).to_contain_text("TEA-0427")
    shot(page, artifacts, "reloaded")
    # a new thread, then back to the first one from the list
    page.locator("#new-thread").click()
    expect(page.locator("#messages > *")).to_have_count(0)
    entry = page.locator(f'#threads li[data-thread="{thread}"]')
    expect(entry.locator(".open .title")).to_have_text(TASK[:80])
    entry.locator(".open").click()
    expect(page.locator(".msg.user")).to_have_text(re.compile(re.escape(TASK)))
    expect(entry.locator(".open")).to_have_attribute("aria-current", "true")
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    entry.locator(".delete").click()
    expect(entry).to_have_count(0)
    expect(page.locator("#messages > *")).to_have_count(0)
    assert httpx.get(f"{live.url}/agents/travel_agent/threads/{thread}").status_code == 404
    shot(page, artifacts, "deleted")


def test_a_run_error_is_shown_readably(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live, "broken")
    send(page, "Hello")
    error = page.locator(".error[role=alert]")
    expect(error).to_be_visible()
    expect(error.locator("strong")).to_have_text("Run failed · NodeRunError")  # the server's code: the error class
    expect(error).to_contain_text("node [ChatModel] failed (ValueError); the server log has the details")
    expect(error).not_to_contain_text("sk-test")  # the model's error text stays in the server log
    assert event_types(page)[-1] == "RUN_ERROR"
    expect(page.locator("#input")).to_be_focused()
    # the page stays usable: another agent can be picked
    page.locator("#agent").select_option("travel_agent")
    expect(page.locator("#agent-description")).to_contain_text("plans day trips")
    shot(page, artifacts, "error")


def test_the_page_fits_a_phone(browser: Any, live: Live, artifacts: Path) -> None:
    context, page, errors = new_page(browser, 390, 844)
    try:
        open_page(page, live)
        send(page, TASK)
        card = wait_for_approval(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for part in (card.locator(".approve"), card.locator(".reject"), page.locator("#send")):
            box = part.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        shot(page, artifacts, "phone", full_page=True)
        card.locator(".approve").click()
        expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        expect(page.locator("#graph-box svg[data-graph]")).to_be_visible()
        svg_box = page.locator("#graph-box svg").bounding_box()
        assert svg_box is not None and svg_box["width"] <= 390
        shot(page, artifacts, "phone-finished", full_page=True)
    finally:
        context.close()
    assert errors == []


@pytest.mark.parametrize("at", ["start", "chunk"])
def test_stop_cancels_the_run_and_the_thread_keeps_what_it_had(page: Page, live: Live, gate: Gate, at: str) -> None:
    # held while the model call starts, or while its answer streams (the server closes the answer's stream)
    gate.close(at=at)
    open_page(page, live)
    send(page, TASK)
    if at == "start":
        expect(page.locator("#events [data-type=STATE_SNAPSHOT]")).to_have_count(1)
    else:
        expect(page.locator(".msg.assistant.streaming .text")).to_have_text("先查明天杭州")
    page.locator("#stop").click()
    expect(page.locator(".note")).to_contain_text("stopped")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#send")).to_be_enabled()
    assert live.app.state.tracker.wait_idle(10)  # the server cancelled the run when the page let go of it
    thread = page.evaluate("devui.threadId")
    kept = httpx.get(f"{live.url}/agents/travel_agent/threads/{thread}").json()
    assert kept["interrupts"] == []
    # stopped before the model answered or while its answer streams, the run paused at once: its turn is kept
    # with its checkpoint (the same input continues it; the cut-off answer is asked again)
    assert [m["role"] for m in kept["messages"]] == ["user"]


def test_the_keyboard_reaches_every_control_in_order(page: Page, live: Live) -> None:
    open_page(page, live)
    send(page, "Plan my day")
    wait_for_approval(page)
    page.locator(".approval .approve").press("Tab")
    expect(page.locator(".approval .reject")).to_be_focused()
    page.locator("#agent").focus()
    order = ["agent"]
    for _ in range(10):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.id || document.activeElement.className"))
    # header, threads, the conversation, the approval card, the composer (Send is off while a call waits), state
    assert order == [
        "agent",
        "new-thread",
        "open",
        "delete danger",
        "messages",
        "args",
        "approve",
        "reject",
        "input",
        "state",
        "",  # the first event of the events pane (its summary)
    ]
    assert page.evaluate("document.activeElement.tagName") == "SUMMARY"


def box_of(page: Page, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


def inside(page: Page, inner: str, outer: str) -> bool:
    """``inner``'s box lies within ``outer``'s (a pixel of rounding allowed)."""
    a, b = box_of(page, inner), box_of(page, outer)
    return (
        a["x"] >= b["x"] - 1
        and a["y"] >= b["y"] - 1
        and a["x"] + a["width"] <= b["x"] + b["width"] + 1
        and a["y"] + a["height"] <= b["y"] + b["height"] + 1
    )


def test_the_page_fits_1280x800(page: Page, live: Live, artifacts: Path) -> None:
    open_page(page, live)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert page.evaluate("document.documentElement.scrollHeight") <= 800
    for pane in ("#threads-pane", "#chat-pane", "#graph-pane", "#events-pane"):
        box = page.locator(pane).bounding_box()
        assert box is not None and box["width"] > 150 and box["y"] + box["height"] <= 800
    # the whole graph (its end node too) and the session state are shown, not clipped: at the start, while a call
    # waits, and with the booking in the state
    send(page, TASK)
    wait_for_approval(page)
    for moment in ("waiting", "finished"):
        if moment == "finished":
            page.locator(".approval .approve").click()
            expect(page.locator("#state")).to_contain_text("TEA-0427")
        for part in ("#graph-box svg[data-graph]", "#graph-box [data-node=end]", "#state-title", "#state"):
            assert inside(page, part, "#graph-box" if part.startswith("#graph-box") else "#graph-pane"), (moment, part)
            assert inside(page, part, "#graph-pane") and box_of(page, part)["y"] + box_of(page, part)["height"] <= 800
        assert page.evaluate("(p => p.scrollHeight <= p.clientHeight)(document.getElementById('graph-pane'))")
        assert page.evaluate("(b => b.scrollHeight <= b.clientHeight)(document.getElementById('graph-box'))")
        assert box_of(page, "#state")["height"] >= 50  # a few lines of it, at least
    shot(page, artifacts, "fits-1280x800")


def test_the_call_waiting_for_approval_is_scrolled_into_view(page: Page, live: Live) -> None:
    open_page(page, live)
    send(page, TASK)
    wait_for_approval(page)
    assert inside(page, '.tool[data-call="call_book"]', "#messages")
    page.reload()  # reopened from the server, the same
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    wait_for_approval(page)
    assert inside(page, '.tool[data-call="call_book"]', "#messages")


def test_threads_are_listed_most_recent_first_with_their_time(page: Page, live: Live) -> None:
    open_page(page, live)
    send(page, "Plan my day")
    wait_for_approval(page)
    first = page.evaluate("devui.threadId")
    page.locator("#new-thread").click()
    send(page, TASK)
    wait_for_approval(page)
    second = page.evaluate("devui.threadId")
    threads = page.locator("#threads li[data-thread]")
    expect(threads).to_have_count(2)
    assert threads.evaluate_all("items => items.map(i => i.dataset.thread)") == [second, first]
    # the first thread answered: it is the most recent now
    threads.nth(1).locator(".open").click()
    expect(page.locator(f'#threads li[data-thread="{first}"] .open')).to_have_attribute("aria-current", "true")
    expect(page.locator(".msg.user")).to_have_text(re.compile("Plan my day"))
    expect(page.locator(".approval")).to_be_visible()
    page.locator(".approval .approve").click()
    expect(page.locator(".msg.assistant").last).to_contain_text(FINAL)
    expect(page.locator("#threads li[data-thread]").first).to_have_attribute("data-thread", first)
    listed = httpx.get(f"{live.url}/agents/travel_agent/threads").json()["threads"]
    for item, thread in zip(threads.all(), listed, strict=True):
        when = item.locator(".open time.when")
        expect(when).to_have_attribute("datetime", thread["updated"])
        expect(when).to_have_text(re.compile(r"\d"))


def test_the_page_applies_json_patch_as_rfc_6902_says(page: Page, live: Live) -> None:
    open_page(page, live)
    doc = {"a": {"b": [1, 2]}, "c": "x", "d/e": 1, "f~g": 2}
    ops = [
        {"op": "add", "path": "/a/b/1", "value": 9},
        {"op": "add", "path": "/a/b/-", "value": 3},
        {"op": "replace", "path": "/c", "value": {"deep": True}},
        {"op": "remove", "path": "/d~1e"},
        {"op": "move", "from": "/f~0g", "path": "/h"},
        {"op": "copy", "from": "/a/b", "path": "/i"},
        {"op": "test", "path": "/h", "value": 2},
    ]
    patched = page.evaluate("([doc, ops]) => devui.applyPatch(doc, ops)", [doc, ops])
    assert patched == {"a": {"b": [1, 9, 2, 3]}, "c": {"deep": True}, "h": 2, "i": [1, 9, 2, 3]}
    assert page.evaluate("([doc]) => devui.applyPatch(doc, [{op: 'add', path: '/x', value: 1}]) && doc", [doc]) == doc
    failed = page.evaluate(
        "([doc]) => { try { devui.applyPatch(doc, [{op: 'test', path: '/c', value: 'y'}]); }"
        " catch (e) { return e.message } }",
        [doc],
    )
    assert failed == "test failed at /c"
