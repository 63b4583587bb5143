// A headless chat of the AI SDK: the smallest state a chat needs (what @ai-sdk/react's `Chat` keeps in React state),
// with a way to wait for it. `chatOf(AbstractChat)` gives the class for the SDK package the script loaded.
class State {
  constructor(messages = []) {
    this.status = "ready";
    this.error = undefined;
    this.messages = messages;
    this.waiting = [];
  }
  changed() {
    for (const waiter of this.waiting.splice(0)) waiter();
  }
  pushMessage(message) {
    this.messages = [...this.messages, message];
    this.changed();
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
    this.changed();
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
    this.changed();
  }
  snapshot(thing) {
    return structuredClone(thing);
  }
}

export function chatOf(AbstractChat) {
  return class Chat extends AbstractChat {
    constructor({ messages, ...init }) {
      const state = new State(messages);
      super({ ...init, state });
      const setStatus = this.setStatus.bind(this);
      this.setStatus = (update) => {
        setStatus(update);
        state.changed();
      };
    }
    async until(done, what) {
      const deadline = Date.now() + 30_000;
      while (!done(this)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(this.messages)}`);
        await new Promise((resolve) => {
          this.state.waiting.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    }
  };
}
