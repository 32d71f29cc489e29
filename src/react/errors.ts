import { DurableError } from "../errors.ts";

/** A hook of pi-durable-web/react ran outside a `<HarnessProvider>`. */
export class NoHarnessProvider extends DurableError {
  override name = "NoHarnessProvider";
}

/** `useChat` asked the durable transport for something a durable conversation does not do (see the README). */
export class UnsupportedChatRequest extends DurableError {
  override name = "UnsupportedChatRequest";
}

/** A hook was asked to act before its client or conversation was there. */
export class NotReady extends DurableError {
  override name = "NotReady";
}
