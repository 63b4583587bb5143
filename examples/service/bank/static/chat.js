// The bank's chat page: plain JavaScript, no build step (not the AI SDK's client: the same stream, read by hand).
// It posts a message, reads the run back as the Vercel AI data-stream protocol (server-sent events, read with
// fetch and a ReadableStream), shows the text as it streams, grows the call tree from the `data-llm-do-call`
// parts, and answers each `tool-approval-request` with a POST to the session's decisions endpoint. The
// conversation is in the address (`?user=...&session=...`): a reload shows it again (GET /chat/sessions/{id}) and
// reattaches to its run in flight (GET /chat/sessions/{id}/stream), open question included, whichever process of
// the service the reload reaches.
"use strict";

const $ = (selector) => document.querySelector(selector);
let sessionId = null;
let runs = 0;

function element(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = text;
  return made;
}

function user() {
  return $("#user").value.trim();
}

async function get(path) {
  const response = await fetch(path, { headers: { "x-user": user() } });
  if (!response.ok) {
    let message = `${response.status}`;
    try { message = (await response.json()).error ?? message; } catch (ignored) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": user() },
    body: JSON.stringify(body ?? {}),
  });
  if (!response.ok && response.status !== 204) {
    let message = `${response.status}`;
    try { message = (await response.json()).error ?? message; } catch (ignored) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

async function openSession() {
  const response = await post("/chat/sessions");
  useSession((await response.json()).id);
}

function useSession(id) {
  sessionId = id;
  $("#session").textContent = sessionId;
  $("#user").disabled = true; // the session belongs to this user
  const address = new URLSearchParams({ user: user(), session: sessionId });
  history.replaceState(null, "", `${location.pathname}?${address}`); // a reload comes back to it
}

// Server-sent events from a fetch response: yields each `data:` payload, parsed.
async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      for (const line of block.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        yield JSON.parse(data);
      }
    }
  }
}

// One assistant message: its streamed text, its tool calls, its approvals, its part of the call tree.
class Reply {
  constructor(run) {
    this.run = run;
    this.box = element("div", "message assistant");
    this.box.dataset.run = run;
    this.asks = element("div", "asks"); // questions and tool outcomes, above the answer they lead to
    this.text = element("div", "text");
    this.box.append(this.asks, this.text);
    $("#messages").append(this.box);
    this.inputs = new Map(); // toolCallId -> {toolName, input}
    this.approvals = new Map(); // approvalId -> element
    this.calls = new Map(); // call id -> tree item
    this.tools = new Map(); // tool call id -> tree item
  }

  handle(chunk) {
    switch (chunk.type) {
      case "text-delta":
        this.text.textContent += chunk.delta;
        break;
      case "tool-input-available":
        this.inputs.set(chunk.toolCallId, { toolName: chunk.toolName, input: chunk.input });
        break;
      case "tool-approval-request":
        this.askApproval(chunk.approvalId, chunk.toolCallId);
        break;
      case "tool-output-denied":
        this.asks.append(element("div", "tool", `${this.inputs.get(chunk.toolCallId)?.toolName ?? "tool"}: denied`));
        break;
      case "data-llm-do-call":
        this.showCall(chunk.data);
        break;
      case "data-llm-do-tool":
        this.showTool(chunk.data);
        break;
      case "data-llm-do-approval":
        this.showApproval(chunk.data);
        break;
      case "error":
        this.box.append(element("div", "error", chunk.errorText));
        break;
    }
  }

  askApproval(approvalId, toolCallId) {
    const asked = this.inputs.get(toolCallId) ?? { toolName: "a tool", input: {} };
    const box = element("div", "approval");
    box.dataset.approvalId = approvalId;
    box.dataset.state = "pending";
    box.append(element("div", "what", `${asked.toolName} ${JSON.stringify(asked.input)}`));
    const approve = element("button", "approve", "Approve");
    const deny = element("button", "deny", "Deny");
    approve.onclick = () => this.decide(box, approvalId, "approve");
    deny.onclick = () => this.decide(box, approvalId, "deny");
    box.append(approve, " ", deny, element("span", "outcome"));
    this.approvals.set(approvalId, box);
    this.asks.append(box);
  }

  async decide(box, approvalId, choice) {
    for (const button of box.querySelectorAll("button")) button.disabled = true;
    try {
      await post(`/chat/sessions/${sessionId}/decisions`, { approval_id: approvalId, choice });
    } catch (error) {
      box.querySelector(".outcome").textContent = ` not sent: ${error.message}`;
      for (const button of box.querySelectorAll("button")) button.disabled = false;
    }
  }

  showApproval(data) {
    const box = this.approvals.get(data.approval_id);
    if (!box) return;
    if (data.description) box.querySelector(".what").textContent = data.description;
    box.dataset.state = data.state;
    if (data.state !== "pending") {
      for (const button of box.querySelectorAll("button")) button.remove();
      box.querySelector(".outcome").textContent = data.state + (data.why ? `: ${data.why}` : "");
    }
  }

  showCall(call) {
    let item = this.calls.get(call.id);
    if (!item) {
      item = element("li", "call");
      item.dataset.call = call.id;
      item.dataset.entry = call.entry;
      item.append(element("span", "entry", call.entry), element("span", "state"), element("ul"));
      const parent = call.parent ? this.calls.get(call.parent)?.querySelector("ul") : $("#tree > ul");
      (parent ?? $("#tree > ul")).append(item);
      this.calls.set(call.id, item);
    }
    item.dataset.state = call.state;
    const usage = call.usage ? ` (${call.usage.requests} requests, ${call.usage.tool_calls} tool calls)` : "";
    item.querySelector(".state").textContent = call.state + usage;
  }

  showTool(tool) {
    let item = this.tools.get(tool.tool_call_id);
    if (!item) {
      item = element("li", "tool");
      item.append(element("span", "entry", tool.tool), element("span", "state"));
      this.calls.get(tool.call)?.querySelector("ul").append(item);
      this.tools.set(tool.tool_call_id, item);
    }
    item.dataset.state = tool.state;
    item.querySelector(".state").textContent = tool.state + (tool.result !== undefined ? `: ${tool.result}` : "");
  }
}

async function send(text) {
  if (!user()) throw new Error("say who you are first");
  if (!sessionId) await openSession();
  $("#messages").append(element("div", "message user", text));
  const reply = new Reply(++runs);
  const response = await post(`/chat/sessions/${sessionId}/messages`, { text });
  for await (const chunk of events(response)) reply.handle(chunk);
  reply.box.dataset.done = "true";
}

// A reload: the conversation so far, then its run in flight from the start (its open questions among it), both
// asked at once.
async function reattach(id) {
  useSession(id);
  const [conversation, response] = await Promise.all([
    get(`/chat/sessions/${id}`),
    get(`/chat/sessions/${id}/stream?follow=true`),
  ]);
  const saved = await conversation.json();
  let answer = null; // one reply per answer: a run's tool calls and its text may be saved as several messages
  for (const message of saved.messages) {
    const text = message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");
    if (message.role === "user") {
      $("#messages").append(element("div", "message user", text));
      answer = null;
    } else {
      if (!answer) {
        answer = new Reply(++runs);
        answer.box.dataset.done = "true";
      }
      answer.text.textContent += text;
    }
  }
  if (response.status === 204) {
    if (saved.pending.length === 0) return;
    const reply = new Reply(++runs); // questions that wait with no run in flight (a parked run's): answered all the same
    for (const asked of saved.pending) {
      reply.inputs.set(asked.tool_call_id, { toolName: asked.tool, input: asked.args });
      reply.askApproval(asked.approval_id, asked.tool_call_id);
    }
    return;
  }
  const reply = new Reply(++runs);
  $("#send").disabled = true;
  try {
    for await (const chunk of events(response)) reply.handle(chunk);
    reply.box.dataset.done = "true";
  } finally {
    $("#send").disabled = false;
  }
}

$("#composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("#text").value.trim();
  if (!text) return;
  $("#text").value = "";
  $("#send").disabled = true;
  try {
    await send(text);
  } catch (error) {
    $("#messages").append(element("div", "message assistant error", error.message));
  } finally {
    $("#send").disabled = false;
  }
});

const address = new URLSearchParams(location.search);
$("#user").value = address.get("user") ?? "";
if (address.get("session")) {
  reattach(address.get("session")).catch((error) => {
    $("#messages").append(element("div", "message assistant error", error.message));
  });
}
