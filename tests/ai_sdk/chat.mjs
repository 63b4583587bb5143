// The AI SDK's own client (the `ai` package, unchanged) against the example's chat service: its chat with the
// default transport, approvals answered its way, a reload that resumes the run in flight, and the messages
// converted back for a model. Prints one JSON object (what each step saw) for tests/web/test_ai_sdk.py.
//
//   node chat.mjs http://127.0.0.1:PORT [ai | ai7]
//
// `ai` is AI SDK 6 (the one whose engines include this Node); `ai7` is AI SDK 7, told so with `?sdk=7` on the api.
import { chatOf } from "./headless_chat.mjs";

const pkg = process.argv[3] ?? "ai";
const {
  AbstractChat,
  DefaultChatTransport,
  convertToModelMessages,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
} = await import(pkg);

const base = process.argv[2];
const sessions = `${base}/chat/sessions`;
const query = pkg === "ai" ? "" : "?sdk=7";
const api = `${sessions}${query}`;

const Chat = chatOf(AbstractChat);

function transport(user, follow = false) {
  const address = follow ? `${sessions}${query ? `${query}&` : "?"}follow=true` : api;
  return new DefaultChatTransport({ api: address, headers: { "x-user": user } });
}

const tools = (message) => message.parts.filter((part) => part.type === "dynamic-tool" || part.type.startsWith("tool-"));
const text = (message) => message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");
const asked = (message) => tools(message).find((part) => part.state === "approval-requested");
const last = (chat) => chat.messages[chat.messages.length - 1];

function summary(message) {
  return {
    id: message.id,
    role: message.role,
    text: text(message),
    tools: tools(message).map((part) => ({
      type: part.type,
      name: part.toolName ?? part.type.slice(5),
      state: part.state,
      providerExecuted: part.providerExecuted ?? false,
      call: part.callProviderMetadata?.llm_do ?? null,
      approval: part.approval ?? null,
    })),
    data: message.parts.filter((part) => part.type.startsWith("data-")).map((part) => ({ type: part.type, data: part.data })),
  };
}

const out = { version: JSON.parse(await (await import("node:fs/promises")).readFile(new URL(`./node_modules/${pkg}/package.json`, import.meta.url))).version };

// 1. The person's message, its question answered the SDK's way (the answer travels in the next request).
const chat = new Chat({
  transport: transport("alice"),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
});
await chat.sendMessage({ text: "move 10 from A to B" });
out.chat_id = chat.id;
out.first = { status: chat.status, error: chat.error?.message ?? null, message: summary(last(chat)) };
const question = asked(last(chat));
if (!question) throw new Error(`no question: ${chat.status} ${chat.error} ${JSON.stringify(chat.messages)}`);
await chat.addToolApprovalResponse({ id: question.approval.id, approved: true });
await chat.until((it) => it.status === "ready" && text(last(it)).includes("Done"), "the answer after the approval");
out.answered = { status: chat.status, messages: chat.messages.length, message: summary(last(chat)) };
out.model_messages = await convertToModelMessages(chat.messages);

// 2. The conversation goes on in the same chat (the same session, its history on the server).
await chat.sendMessage({ text: "what did I do?" });
out.second = { status: chat.status, text: text(last(chat)) };

// 3. Another person may neither write to nor resume Alice's chat.
const intruder = new Chat({ id: chat.id, transport: transport("bob") });
await intruder.sendMessage({ text: "move 50 from A to B" });
out.intruder = { status: intruder.status, error: intruder.error?.message ?? null };
try {
  await transport("bob").reconnectToStream({ chatId: chat.id });
  out.intruder.resumed = true;
} catch (error) {
  out.intruder.resumed = error.message;
}

// 4. A reload mid-question: a new chat with the same id, its messages from the server, resumes the run in flight.
const before = new Chat({ transport: transport("alice") });
await before.sendMessage({ text: "move 5 from A to B" });
const open = asked(last(before));
out.before_reload = { message: summary(last(before)), approval: open.approval.id };

const saved = await (await fetch(`${sessions}/${before.id}`, { headers: { "x-user": "alice" } })).json();
out.saved = { running: saved.running, pending: saved.pending.map((item) => item.approval_id), roles: saved.messages.map((m) => m.role) };
// the stream as readUIMessageStream reads it: from the start, to the open question
let replayed;
for await (const message of readUIMessageStream({ stream: await transport("alice").reconnectToStream({ chatId: before.id }) })) {
  replayed = message;
}
out.replayed = summary(replayed);

const after = new Chat({
  id: before.id,
  messages: saved.messages,
  transport: transport("alice"),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
});
await after.resumeStream();
out.resumed = { status: after.status, message: summary(last(after)), messages: after.messages.length };

// another tab follows the run (the same transport, `?follow=true` on its api: its stream stays open at questions)
const follower = new Chat({ id: before.id, transport: transport("alice", true) });
const following = follower.resumeStream();
await follower.until((it) => it.messages.length > 0 && asked(last(it)) !== undefined, "the follower to see the question");
out.follower_asked = summary(last(follower));

// the reloaded chat answers the SDK's way; the follower sees the question answered and the run finish
await after.addToolApprovalResponse({ id: open.approval.id, approved: true });
await after.until((it) => it.status === "ready" && text(last(it)).includes("Done"), "the reloaded chat's answer");
out.finished = { status: after.status, message: summary(last(after)) };
await following;
out.follower = { status: follower.status, message: summary(last(follower)) };
out.nothing_to_resume = (await transport("alice").reconnectToStream({ chatId: before.id })) === null;

console.log(JSON.stringify(out));
