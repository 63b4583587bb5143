// The AI SDK's own client across two processes of the example's chat service: a chat started on one, reloaded on
// the other (its messages and its resumable stream read there), answered the SDK's way there. Prints one JSON
// object for tests/web/test_ai_sdk.py.
//
//   node anywhere.mjs http://127.0.0.1:PORT1 http://127.0.0.1:PORT2 [ai | ai7]
import { chatOf } from "./headless_chat.mjs";

const pkg = process.argv[4] ?? "ai";
const { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } = await import(pkg);

const [first, other] = [process.argv[2], process.argv[3]];
const query = pkg === "ai" ? "" : "?sdk=7";

const Chat = chatOf(AbstractChat);

const transport = (base) =>
  new DefaultChatTransport({ api: `${base}/chat/sessions${query}`, headers: { "x-user": "alice" } });
const tools = (message) => message.parts.filter((part) => part.type === "dynamic-tool" || part.type.startsWith("tool-"));
const text = (message) => message.parts.filter((part) => part.type === "text").map((part) => part.text).join("");
const asked = (message) => tools(message).find((part) => part.state === "approval-requested");
const last = (chat) => chat.messages[chat.messages.length - 1];
const out = {};

// on the first process: the person's message, to its question
const before = new Chat({ transport: transport(first) });
await before.sendMessage({ text: "move 5 from A to B" });
const open = asked(last(before));
if (!open) throw new Error(`no question: ${before.status} ${before.error} ${JSON.stringify(before.messages)}`);
out.before = { id: last(before).id, approval: open.approval.id };

// the reload lands on the other process: the conversation read there, the run's stream resumed there
const saved = await (await fetch(`${other}/chat/sessions/${before.id}`, { headers: { "x-user": "alice" } })).json();
out.saved = { running: saved.running, pending: saved.pending.map((item) => [item.approval_id, item.held]) };
const after = new Chat({
  id: before.id,
  messages: saved.messages,
  transport: transport(other),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
});
await after.resumeStream();
const resumed = asked(last(after));
out.resumed = { status: after.status, id: last(after).id, approval: resumed?.approval.id ?? null };

// answered the SDK's way, there: applied in the first process, the rest streamed from the other
await after.addToolApprovalResponse({ id: open.approval.id, approved: true });
await after.until((it) => it.status === "ready" && text(last(it)).includes("Done"), "the answer after the approval");
out.finished = { status: after.status, id: last(after).id, text: text(last(after)) };
out.nothing_to_resume = await Promise.all(
  [first, other].map(async (base) => (await transport(base).reconnectToStream({ chatId: before.id })) === null),
);
console.log(JSON.stringify(out));
