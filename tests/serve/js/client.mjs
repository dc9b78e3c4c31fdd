// Drives @ag-ui/client's HttpAgent against a live adk.serve server; prints what it saw as one JSON line.
// Usage: node client.mjs <base url>
import { HttpAgent } from "@ag-ui/client";

const base = process.argv[2];

function recorder() {
  const seen = { text: "", toolCalls: [], results: [], events: [], outcome: null, interrupts: [], pending: [], errors: [] };
  const subscriber = {
    onEvent: ({ event }) => { seen.events.push(event.type); },
    onTextMessageContentEvent: ({ event }) => { seen.text += event.delta; },
    onToolCallEndEvent: ({ event, toolCallName, toolCallArgs }) => {
      seen.toolCalls.push({ id: event.toolCallId, name: toolCallName, args: toolCallArgs });
    },
    onToolCallResultEvent: ({ event }) => { seen.results.push({ id: event.toolCallId, content: event.content }); },
    onRunFinishedEvent: (params) => {
      seen.outcome = params.outcome;
      seen.result = params.event.result ?? null;
      if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
      if (params.outcome === "success") seen.pending = params.pendingToolCallIds;
    },
    onRunErrorEvent: ({ event }) => { seen.errors.push({ code: event.code, message: event.message }); },
  };
  return { seen, subscriber };
}

async function run(agent, params) {
  const { seen, subscriber } = recorder();
  const result = await agent.runAgent(params, subscriber);
  seen.newMessages = result.newMessages.map((m) => m.role);
  return seen;
}

const out = {};

// a streamed tool round
const weather = new HttpAgent({ url: `${base}/agents/weather/agui`, threadId: "ts-weather" });
weather.addMessage({ id: "u1", role: "user", content: "Weather in Hangzhou?" });
out.weather = await run(weather, { runId: "ts-r1" });
out.weatherMessages = weather.messages.map((m) => m.role);

// an approval pause, then its resume
const payer = new HttpAgent({ url: `${base}/agents/payer/agui`, threadId: "ts-pay" });
payer.addMessage({ id: "u1", role: "user", content: "Pay invoice 7" });
out.paused = await run(payer, { runId: "ts-r2" });
const resume = out.paused.interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { approved: true } }));
out.resumed = await run(payer, { runId: "ts-r3", resume });

// a client tool round
const confirm = {
  name: "confirm",
  description: "Ask the user to confirm",
  parameters: { type: "object", properties: { what: { type: "string" } }, required: ["what"] },
};
const planner = new HttpAgent({ url: `${base}/agents/planner/agui`, threadId: "ts-plan" });
planner.addMessage({ id: "u1", role: "user", content: "Plan a trip" });
out.client1 = await run(planner, { runId: "ts-r4", tools: [confirm] });
for (const id of out.client1.pending) {
  planner.addMessage({ id: `tool-${id}`, role: "tool", toolCallId: id, content: "yes" });
}
out.client2 = await run(planner, { runId: "ts-r5", tools: [confirm] });

console.log(JSON.stringify(out));
