// pyeino dev page: an AG-UI client of the server that serves it (POST /agents/{name}/agui, read as an SSE stream),
// plus the thread and graph reads (GET /agents/{name}/threads, /threads/{id}, /graph). Plain JS, no dependencies
// (agui.js reads the event stream and applies JSON Patch, graph.js draws the pictures; both load first).
// window.devui exposes the page's state (events seen, partial texts, active nodes) for tests and the console.
"use strict";
(() => {
  const { sseEvents, applyPatch, drawGraph, drawTree } = window.pyeinoDev;
  const $ = (id) => document.getElementById(id);

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }

  const page = (window.devui = {
    agents: [], agent: null, threadId: null, messages: [], state: {}, tree: null, graphs: new Map(),
    running: null, pending: [], events: [], textLog: [], activeLog: [], activeAgent: null, activeNode: null, stepAgent: null,
    // what the page knows of each interrupt shown (a thread read gives less than the run's outcome did), the
    // arguments typed on each approval card, and each call's arguments as approved with edits (what ran)
    interrupts: new Map(), drafts: new Map(), edits: new Map(),
    subagents: new Map(), runStart: 0, lastEventAt: 0, applyPatch,
  });

  // ---------------------------------------------------------------- HTTP
  async function api(path, options = {}) {
    let response;
    try {
      response = await fetch(path, { headers: { Accept: "application/json" }, ...options });
    } catch (exc) {
      return { ok: false, status: 0, error: `cannot reach the server (${exc.message})` };
    }
    if (response.status === 204) return { ok: true, status: 204, data: null };
    let data = null;
    try { data = await response.json(); } catch { data = null; }
    if (!response.ok) return { ok: false, status: response.status, error: (data && data.error) || response.statusText, data };
    return { ok: true, status: response.status, data };
  }

  const agentPath = (name) => `agents/${encodeURIComponent(name)}`;

  function indexTree(tree) {
    page.graphs = new Map();
    const walk = (t) => { if (t.graph) page.graphs.set(t.name, t.graph); t.children.forEach(walk); };
    walk(tree);
  }

  function showGraphOf(name) {
    const graph = page.graphs.get(name);
    const box = $("graph-box");
    if (box.dataset.agent === name) return;
    box.replaceChildren();
    box.dataset.agent = name || "";
    $("graph-agent").textContent = name ? `· ${name}` : "";
    if (graph) box.append(drawGraph(graph, `graph of agent ${name}`));
    else box.append(el("p", { class: "muted", text: `${name || "this agent"} runs no compiled graph` }));
    page.activeNode = null;
  }

  function setActiveAgent(name) {
    if (!name || name === page.activeAgent) return;
    page.activeAgent = name;
    for (const g of document.querySelectorAll("#tree-box [data-agent]")) g.classList.toggle("active", g.dataset.agent === name);
    if (page.graphs.has(name)) showGraphOf(name);
  }

  // which node of the active agent's graph an event puts the run in: a node id, or a node kind to look up
  function setActiveNode(which) {
    const box = $("graph-box");
    const node = box.querySelector(`[data-node="${CSS.escape(which)}"]`) || box.querySelector(`[data-kind="${CSS.escape(which)}"]`);
    if (!node) return;
    const id = node.dataset.node;
    if (page.activeNode === id) return;
    for (const g of box.querySelectorAll(".node.active")) { g.classList.remove("active"); g.classList.add("visited"); }
    node.classList.add("active");
    page.activeNode = id;
    page.activeLog.push(`${box.dataset.agent}:${id}`);
  }

  // ---------------------------------------------------------------- chat
  const messagesBox = $("messages");
  const scrollDown = () => { messagesBox.scrollTop = messagesBox.scrollHeight; };

  function addUser(text, id) {
    messagesBox.append(el("div", { class: "msg user", "data-id": id }, el("span", { class: "who", text: "you" }), text));
    scrollDown();
  }

  function assistantBubble(id, who) {
    let bubble = messagesBox.querySelector(`.msg.assistant[data-id="${CSS.escape(id)}"]`);
    if (!bubble) {
      bubble = el("div", { class: "msg assistant", "data-id": id }, el("span", { class: "who", text: who || "assistant" }), el("span", { class: "text" }));
      messagesBox.append(bubble);
    }
    return bubble;
  }

  function toolCard(id, name) {
    let card = messagesBox.querySelector(`.tool[data-call="${CSS.escape(id)}"]`);
    if (!card) {
      card = el("div", { class: "tool running", "data-call": id, role: "group", "aria-label": `tool call ${name}` },
        el("div", { class: "tool-head" }, el("span", { class: "name", text: `⚙ ${name}` }), el("span", { class: "status", text: "calling…" })),
        el("div", { class: "label args-label", text: "arguments" }), el("pre", { class: "args" }),
        el("div", { class: "label result-label", hidden: true, text: "result" }), el("pre", { class: "result", hidden: true }));
      messagesBox.append(card);
    }
    return card;
  }

  // a call's arguments as shown on its card: as the model made them, or as approved with edits (they are what ran)
  function showArgs(card, args, edited) {
    card.querySelector(".args").textContent = prettyJSON(args);
    card.classList.toggle("edited", edited);
    card.querySelector(".args-label").textContent = edited ? "arguments (edited on approval)" : "arguments";
  }

  function setToolStatus(card, status, text) {
    card.classList.remove("running", "done", "rejected", "waiting", "failed");
    card.classList.add(status);
    card.querySelector(".status").textContent = text;
  }

  function toolResult(id, content) {
    const card = messagesBox.querySelector(`.tool[data-call="${CSS.escape(id)}"]`) || toolCard(id, "tool");
    const result = card.querySelector(".result");
    result.hidden = false;
    card.querySelector(".result-label").hidden = false;
    result.textContent = prettyJSON(content);
    const rejected = /^The call to tool '.*' was rejected/.test(content);
    setToolStatus(card, rejected ? "rejected" : "done", rejected ? "rejected" : "done");
    scrollDown();
  }

  function prettyJSON(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return String(text ?? ""); }
  }

  function showError(title, message) {
    messagesBox.append(el("div", { class: "error", role: "alert" }, el("strong", { text: title }), message));
    scrollDown();
  }

  function note(text) { messagesBox.append(el("div", { class: "note", text })); scrollDown(); }

  function renderMessages(messages) {
    messagesBox.replaceChildren();
    for (const m of messages) {
      if (m.role === "user") addUser(typeof m.content === "string" ? m.content : JSON.stringify(m.content), m.id);
      else if (m.role === "assistant") {
        if (m.content) assistantBubble(m.id, m.name || (page.tree && page.tree.name)).querySelector(".text").textContent = m.content;
        for (const c of m.toolCalls || []) {
          const edited = page.edits.get(c.id);
          if (edited !== undefined) c.function.arguments = edited;
          showArgs(toolCard(c.id, c.function.name), c.function.arguments, edited !== undefined);
          setToolStatus(toolCard(c.id, c.function.name), "waiting", "no result yet");
        }
      } else if (m.role === "tool") toolResult(m.toolCallId, typeof m.content === "string" ? m.content : JSON.stringify(m.content));
    }
    scrollDown();
  }

  // a log of each streamed answer's text as the page shows it, one entry per change seen by a mutation batch
  // (the observer runs between the network reads): tests read it
  const shown = new Map();
  new MutationObserver((records) => {
    for (const r of records) {
      const target = r.target.nodeType === Node.ELEMENT_NODE ? r.target : r.target.parentElement;
      const bubble = target && target.closest(".msg.assistant[data-streamed]");
      if (!bubble) continue;
      const text = bubble.querySelector(".text").textContent;
      if (text && shown.get(bubble) !== text) { shown.set(bubble, text); page.textLog.push(text); }
    }
  }).observe(messagesBox, { subtree: true, childList: true, characterData: true });

  // ---------------------------------------------------------------- events pane
  function eventInfo(e) {
    switch (e.type) {
      case "TEXT_MESSAGE_CONTENT": case "TOOL_CALL_ARGS": return JSON.stringify(e.delta);
      case "TOOL_CALL_START": return e.toolCallName;
      case "TOOL_CALL_RESULT": return String(e.content).slice(0, 80);
      case "STEP_STARTED": case "STEP_FINISHED": return e.stepName;
      case "SUBAGENT_STARTED": return e.name;
      case "RUN_ERROR": return `${e.code || "error"}: ${e.message}`;
      case "RUN_FINISHED": return (e.outcome && e.outcome.type) || "";
      case "STATE_DELTA": return e.delta.map((o) => `${o.op} ${o.path}`).join(", ");
      case "MESSAGES_SNAPSHOT": return `${e.messages.length} messages`;
      default: return "";
    }
  }

  function logEvent(e) {
    const now = performance.now();
    const t = now - page.runStart, gap = now - page.lastEventAt;
    page.lastEventAt = now;
    page.events.push({ type: e.type, t, event: e });
    const pre = el("pre");
    const details = el("details", {}, el("summary", { title: `${gap.toFixed(1)} ms after the previous event` },
      el("span", { class: "t", text: `+${t.toFixed(0)} ms` }), el("span", { class: "type", text: e.type }), el("span", { class: "info", text: eventInfo(e) })), pre);
    details.addEventListener("toggle", () => { if (details.open && !pre.textContent) pre.textContent = JSON.stringify(e, null, 2); });
    const list = $("events");
    list.append(el("li", { class: `type-${e.type}`, "data-type": e.type }, details));
    $("event-count").textContent = `(${page.events.length})`;
    list.scrollTop = list.scrollHeight;
  }

  // ---------------------------------------------------------------- state
  function showState() { $("state").textContent = JSON.stringify(page.state, null, 2); }

  // ---------------------------------------------------------------- one run: POST, then each event as it arrives
  function handle(e) {
    logEvent(e);
    // the agent an event is of: its subagent's (an agent tool's agent), else the step's
    const who = e.subagentRunId ? page.subagents.get(e.subagentRunId) : page.stepAgent;
    setActiveAgent(who);
    switch (e.type) {
      case "RUN_STARTED": setActiveNode("start"); break;
      case "STEP_STARTED": // a step inside an agent tool's invocation names the agent of that invocation now
        if (e.subagentRunId) page.subagents.set(e.subagentRunId, e.stepName); else page.stepAgent = e.stepName;
        setActiveAgent(e.stepName);
        break;
      case "SUBAGENT_STARTED": page.subagents.set(e.subagentRunId, e.name); setActiveAgent(e.name); break;
      case "TEXT_MESSAGE_START": {
        setActiveNode("ChatModel");
        const bubble = assistantBubble(e.messageId, who);
        bubble.classList.add("streaming");
        bubble.dataset.streamed = "";
        page.messages.push({ id: e.messageId, role: "assistant", content: "" });
        break;
      }
      case "TEXT_MESSAGE_CONTENT": {
        setActiveNode("ChatModel");
        assistantBubble(e.messageId, who).querySelector(".text").append(e.delta);
        const m = page.messages.find((x) => x.id === e.messageId);
        if (m) m.content += e.delta;
        scrollDown();
        break;
      }
      case "TEXT_MESSAGE_END": assistantBubble(e.messageId, who).classList.remove("streaming"); break;
      case "TOOL_CALL_START": setActiveNode("ChatModel"); toolCard(e.toolCallId, e.toolCallName); scrollDown(); break;
      case "TOOL_CALL_ARGS": {
        const args = toolCard(e.toolCallId, "tool").querySelector(".args");
        args.dataset.raw = (args.dataset.raw || "") + e.delta;
        args.textContent = args.dataset.raw;
        break;
      }
      case "TOOL_CALL_END": {
        setActiveNode("ToolsNode");
        const args = toolCard(e.toolCallId, "tool").querySelector(".args");
        args.textContent = prettyJSON(args.dataset.raw || "{}");
        setToolStatus(toolCard(e.toolCallId, "tool"), "running", "running…");
        break;
      }
      case "TOOL_CALL_RESULT":
        setActiveNode("ToolsNode");
        toolResult(e.toolCallId, e.content);
        page.messages.push({ id: e.messageId, role: "tool", toolCallId: e.toolCallId, content: e.content });
        break;
      case "STATE_SNAPSHOT": page.state = e.snapshot || {}; showState(); break;
      case "STATE_DELTA":
        try { page.state = applyPatch(page.state, e.delta); } catch (exc) { note(`state patch not applied: ${exc.message}`); }
        showState();
        break;
      case "MESSAGES_SNAPSHOT": page.messages = e.messages; renderMessages(e.messages); break;
      case "RUN_FINISHED": {
        const outcome = e.outcome || {};
        if (outcome.type === "interrupt") {
          for (const card of messagesBox.querySelectorAll(".tool.waiting")) setToolStatus(card, "waiting", "waiting for approval");
          showInterrupts(outcome.interrupts || []);
        } else setActiveNode("end");
        break;
      }
      case "RUN_ERROR":
        showError(`Run failed${e.code ? ` · ${e.code}` : ""}`, e.message || "(no message)");
        for (const card of messagesBox.querySelectorAll(".tool.running")) setToolStatus(card, "failed", "not finished");
        break;
      default: break;
    }
  }

  async function run(body) {
    const controller = new AbortController();
    page.running = controller;
    setBusy(true);
    page.runStart = page.lastEventAt = performance.now();
    page.activeAgent = page.stepAgent = null;
    $("events").append(el("li", { class: "run-sep" }, el("span", { class: "muted", text: `run ${body.runId}` })));
    let finished = false;
    let failure = null; // why the run did not finish, when it did not
    try {
      const response = await fetch(`${agentPath(page.agent)}/agui`, {
        method: "POST", headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body), signal: controller.signal,
      });
      if (!response.ok) {
        let message = response.statusText;
        try { message = (await response.json()).error || message; } catch { /* not JSON */ }
        failure = message;
        showError(`Request failed · HTTP ${response.status}`, message);
        return;
      }
      for await (const event of sseEvents(response)) {
        handle(event);
        if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") finished = true;
        if (event.type === "RUN_ERROR") failure = event.message || event.code || "the run failed";
      }
      if (!finished) {
        failure = "the server closed the stream before RUN_FINISHED or RUN_ERROR";
        showError("Run ended early", failure);
      }
    } catch (exc) {
      failure = exc.message;
      if (exc.name === "AbortError") note("stopped (the server cancels the run; the thread keeps what it had)");
      else showError("Connection failed", exc.message);
    } finally {
      for (const bubble of messagesBox.querySelectorAll(".msg.streaming")) bubble.classList.remove("streaming");
      if (failure === null) page.drafts.clear();
      else await showStillWaiting(failure);
      page.running = null;
      setBusy(false);
      refreshThreads();
      if (!page.pending.length) $("input").focus();
    }
  }

  const newId = (kind) => `${kind}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

  function runBody(messages, extra = {}) {
    return { threadId: page.threadId, runId: newId("run"), messages, state: {}, tools: [], context: [], forwardedProps: {}, ...extra };
  }

  async function send(text) {
    const message = { id: newId("user"), role: "user", content: text };
    page.messages.push(message);
    addUser(text, message.id);
    $("thread-label").textContent = `thread ${page.threadId}`;
    setHash();
    await run(runBody(page.messages));
  }

  function setBusy(busy) {
    $("send").disabled = busy || page.pending.length > 0;
    $("stop").hidden = !busy;
    $("agent").disabled = busy;
    $("new-thread").disabled = busy;
  }

  // ---------------------------------------------------------------- approvals and other interrupts
  function callOf(toolCallId) {
    for (const m of page.messages) for (const c of m.toolCalls || []) if (c.id === toolCallId) return c;
    return null;
  }

  // a call's arguments approved with edits: the page shows them (and keeps them over the server's snapshots of the
  // thread, which may hold the call as the model made it) as the arguments the call ran with
  function editCall(toolCallId, args) {
    page.edits.set(toolCallId, args);
    const call = callOf(toolCallId);
    if (call) call.function.arguments = args;
    const card = messagesBox.querySelector(`.tool[data-call="${CSS.escape(toolCallId)}"]`);
    if (card) showArgs(card, args, true);
  }

  // after a run that failed, the server says whether the thread still waits (a resume a tool refused, e.g. edited
  // arguments that break its schema, leaves the run paused as it was): then its cards come back with the error, the
  // arguments typed kept, and the calls show the arguments the thread holds (the edits did not run)
  async function showStillWaiting(failure) {
    const answer = await api(`${agentPath(page.agent)}/threads/${encodeURIComponent(page.threadId)}`);
    if (!answer.ok || !(answer.data.interrupts || []).length) return;
    const waiting = new Set(answer.data.interrupts.map((i) => i.toolCallId).filter(Boolean));
    for (const m of answer.data.messages) {
      for (const c of m.toolCalls || []) {
        if (!waiting.has(c.id) || !page.edits.delete(c.id)) continue;
        const mine = callOf(c.id);
        if (mine) mine.function.arguments = c.function.arguments;
        const card = messagesBox.querySelector(`.tool[data-call="${CSS.escape(c.id)}"]`);
        if (card) showArgs(card, c.function.arguments, false);
      }
    }
    showInterrupts(answer.data.interrupts, failure);
  }

  // scroll the conversation (only it) so that ``node`` is in view: its bottom at the bottom when it fits, else its top
  function reveal(node) {
    const box = messagesBox.getBoundingClientRect(), r = node.getBoundingClientRect();
    if (r.top < box.top) messagesBox.scrollTop -= box.top - r.top + 4;
    else if (r.bottom > box.bottom) messagesBox.scrollTop += Math.min(r.bottom - box.bottom + 4, r.top - box.top - 4);
  }

  const known = (obj) => Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== null && v !== undefined));

  function showInterrupts(shown, failure = null) {
    // a thread read gives an interrupt's id, reason, message and call: what the run's outcome gave more is kept
    const interrupts = shown.map((i) => ({ ...page.interrupts.get(i.id), ...known(i) }));
    for (const i of interrupts) page.interrupts.set(i.id, i);
    page.pending = interrupts;
    const box = $("approvals");
    box.replaceChildren();
    const decisions = new Map();
    const decide = (interrupt, entry) => {
      decisions.set(interrupt.id, entry);
      if (decisions.size < interrupts.length) return;
      page.pending = [];
      box.replaceChildren();
      for (const i of interrupts) {
        const payload = decisions.get(i.id).payload;
        if (i.toolCallId && payload && payload.approved && payload.editedArgs) editCall(i.toolCallId, JSON.stringify(payload.editedArgs));
      }
      run(runBody([], { resume: interrupts.map((i) => decisions.get(i.id)) }));
    };
    interrupts.forEach((interrupt, n) => {
      const meta = interrupt.metadata || {};
      const call = interrupt.toolCallId ? callOf(interrupt.toolCallId) : null;
      const toolName = meta.toolName || (call && call.function.name);
      const approval = interrupt.reason === "tool_call" && (interrupt.responseSchema ? "editedArgs" in (interrupt.responseSchema.properties || {}) : !!toolName && !(meta.pyeino || {}).clientTool);
      const titleId = `interrupt-${n}`;
      const card = el("div", { class: "approval", role: "group", "aria-labelledby": titleId, "data-interrupt": interrupt.id });
      const invalid = el("p", { class: "invalid", role: "alert", hidden: !failure });
      if (failure) invalid.textContent = `Not resumed: ${failure}. The run still waits for this answer.`;
      if (approval) {
        const raw = meta.arguments || (call && call.function.arguments) || "{}";
        const argsBox = el("textarea", { class: "args", rows: 5, "aria-label": `arguments of ${toolName}`, spellcheck: "false" });
        argsBox.value = page.drafts.get(interrupt.id) ?? prettyJSON(raw);
        const original = (() => { try { return JSON.stringify(JSON.parse(raw)); } catch { return raw; } })();
        const approve = el("button", { type: "button", class: "approve", text: "Approve", onclick: () => {
          let edited;
          try { edited = JSON.parse(argsBox.value); } catch (exc) {
            invalid.hidden = false; invalid.textContent = `the arguments are not JSON: ${exc.message}`; argsBox.focus(); return;
          }
          page.drafts.set(interrupt.id, argsBox.value);
          const payload = { approved: true };
          if (JSON.stringify(edited) !== original) payload.editedArgs = edited;
          decide(interrupt, { interruptId: interrupt.id, status: "resolved", payload });
        } });
        const reject = el("button", { type: "button", class: "reject", text: "Reject", onclick: () =>
          decide(interrupt, { interruptId: interrupt.id, status: "resolved", payload: { approved: false, reason: "rejected in the dev page" } }) });
        card.append(el("h3", { id: titleId, text: `Approve the call of ${toolName}?` }),
          interrupt.message ? el("p", { class: "muted", text: interrupt.message }) : null,
          el("label", {}, el("span", { class: "label", text: "Arguments (JSON, editable)" }), argsBox), invalid,
          el("div", { class: "buttons" }, approve, reject));
      } else {
        const answer = el("textarea", { class: "answer", rows: 3, "aria-label": "answer" });
        const submit = el("button", { type: "button", class: "approve", text: "Send answer", onclick: () => {
          let payload = answer.value;
          try { payload = JSON.parse(answer.value); } catch { /* plain text */ }
          decide(interrupt, { interruptId: interrupt.id, status: "resolved", payload });
        } });
        const cancel = el("button", { type: "button", class: "reject", text: "Cancel", onclick: () =>
          decide(interrupt, { interruptId: interrupt.id, status: "cancelled" }) });
        card.append(el("h3", { id: titleId, text: `The run waits: ${interrupt.reason}` }),
          el("p", { text: interrupt.message || "" }), answer, invalid, el("div", { class: "buttons" }, submit, cancel));
      }
      box.append(card);
      const callCard = interrupt.toolCallId && messagesBox.querySelector(`.tool[data-call="${CSS.escape(interrupt.toolCallId)}"]`);
      if (callCard) setToolStatus(callCard, "waiting", approval ? "waiting for approval" : "waiting");
    });
    setBusy(!!page.running);
    // the conversation scrolled to the call the first card is about (the cards take room from it)
    const first = interrupts.find((i) => i.toolCallId);
    const callCard = first && messagesBox.querySelector(`.tool[data-call="${CSS.escape(first.toolCallId)}"]`);
    if (callCard) reveal(callCard);
    const approve = box.querySelector(".approve");
    if (approve) approve.focus();
  }

  // ---------------------------------------------------------------- threads
  // a thread's time as the list shows it: the time of day today, else the date (and the time, within the year)
  function when(iso) {
    const at = new Date(iso), now = new Date();
    if (at.toDateString() === now.toDateString()) return at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    const date = { month: "short", day: "numeric", ...(at.getFullYear() === now.getFullYear() ? {} : { year: "numeric" }) };
    return at.toLocaleString([], at.getFullYear() === now.getFullYear() ? { ...date, hour: "2-digit", minute: "2-digit" } : date);
  }

  async function refreshThreads() {
    if (!page.agent) return;
    const list = $("threads");
    const answer = await api(`${agentPath(page.agent)}/threads`);
    if (!answer.ok) { list.replaceChildren(el("li", { class: "empty", text: `threads: ${answer.error}` })); return; }
    const threads = answer.data.threads; // the most recently updated first
    if (!threads.length) { list.replaceChildren(el("li", { class: "empty", text: "no threads yet" })); return; }
    list.replaceChildren(...threads.map((t) => {
      const title = t.title || t.threadId;
      const times = t.updated ? ` · updated ${new Date(t.updated).toLocaleString()} · created ${new Date(t.created || t.updated).toLocaleString()}` : "";
      return el("li", { "data-thread": t.threadId },
        el("button", { type: "button", class: "open", "aria-current": t.threadId === page.threadId ? "true" : "false",
          title: `${t.threadId} · ${t.messages} messages${t.paused ? " · paused" : ""}${times}`, onclick: () => openThread(t.threadId) },
          el("span", { class: "title-line" }, t.paused ? el("span", { class: "badge", text: "paused" }) : null, el("span", { class: "title", text: title })),
          t.updated ? el("time", { class: "when", datetime: t.updated, text: when(t.updated) }) : null),
        el("button", { type: "button", class: "delete danger", "aria-label": `delete thread ${title}`, title: "delete", text: "✕",
          onclick: () => deleteThread(t.threadId) }));
    }));
  }

  function resetView() {
    page.messages = []; page.state = {}; page.pending = []; page.events = []; page.subagents = new Map();
    page.interrupts = new Map(); page.drafts = new Map(); page.edits = new Map();
    page.activeAgent = page.stepAgent = null;
    messagesBox.replaceChildren();
    $("approvals").replaceChildren();
    $("events").replaceChildren();
    $("event-count").textContent = "";
    showState();
    showGraphOf(page.tree ? page.tree.name : page.agent);
    if (page.tree) setActiveAgent(page.tree.name);
    setBusy(false);
  }

  function newThread() {
    page.threadId = newId("t");
    resetView();
    $("thread-label").textContent = "new thread";
    setHash();
    refreshThreads();
    $("input").focus();
  }

  async function openThread(threadId) {
    const answer = await api(`${agentPath(page.agent)}/threads/${encodeURIComponent(threadId)}`);
    if (!answer.ok) {
      newThread();
      if (answer.status !== 404) showError(`Cannot open thread ${threadId} · HTTP ${answer.status}`, answer.error);
      return;
    }
    page.threadId = threadId;
    resetView();
    $("thread-label").textContent = `thread ${threadId}`;
    page.messages = answer.data.messages;
    renderMessages(page.messages);
    page.state = answer.data.state || {};
    showState();
    if (answer.data.interrupts && answer.data.interrupts.length) showInterrupts(answer.data.interrupts);
    setHash();
    refreshThreads();
  }

  async function deleteThread(threadId) {
    const answer = await api(`${agentPath(page.agent)}/threads/${encodeURIComponent(threadId)}`, { method: "DELETE" });
    if (!answer.ok) { showError(`Cannot delete thread ${threadId} · HTTP ${answer.status}`, answer.error); return; }
    if (threadId === page.threadId) newThread(); else refreshThreads();
  }

  // ---------------------------------------------------------------- agents, location
  function setHash() {
    const hash = `#agent=${encodeURIComponent(page.agent || "")}&thread=${encodeURIComponent(page.threadId || "")}`;
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  async function selectAgent(name, threadId) {
    page.agent = name;
    $("agent").value = name;
    const info = page.agents.find((a) => a.name === name);
    $("agent-description").textContent = (info && info.description) || "";
    const answer = await api(`${agentPath(name)}/graph`);
    page.tree = answer.ok ? answer.data.agents : null;
    const treeBox = $("tree-box");
    treeBox.replaceChildren();
    $("graph-box").dataset.agent = "";
    if (page.tree) {
      indexTree(page.tree);
      treeBox.hidden = page.tree.children.length === 0;
      if (!treeBox.hidden) treeBox.append(drawTree(page.tree));
    } else showError("Cannot read the agent's graph", answer.error);
    if (threadId) await openThread(threadId); else newThread();
  }

  async function start() {
    const answer = await api("agents");
    if (!answer.ok) { showError(`Cannot list the agents · HTTP ${answer.status}`, answer.error); return; }
    page.agents = answer.data.agents;
    $("agent").replaceChildren(...page.agents.map((a) => el("option", { value: a.name, text: a.name })));
    const params = new URLSearchParams(location.hash.slice(1));
    const wanted = params.get("agent");
    const agent = page.agents.some((a) => a.name === wanted) ? wanted : page.agents[0].name;
    await selectAgent(agent, wanted === agent ? params.get("thread") : null);
    document.body.dataset.ready = "true";
  }

  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("input");
    const text = input.value.trim();
    if (!text || page.running || page.pending.length) return;
    input.value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.ctrlKey && !event.altKey && !event.metaKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => page.running && page.running.abort());
  $("new-thread").addEventListener("click", newThread);
  $("agent").addEventListener("change", (event) => selectAgent(event.target.value, null));
  start();
})();
