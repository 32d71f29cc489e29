/**
 * A following object's copy served to pages (decisions 0034, 0037): while the tab holds the lease, every page
 * socket, `POST /rpc` and RPC call of the object reaches a read-only host on the copy that follows each push
 * (`ObjectEndOptions.apply`), and the writes a device may make (submit, decide, abortConversation) are forwarded
 * to the tab over its follow socket (`ObjectEnd.call`, topic `forward`). At the takeover `hold` hands everything
 * to the object's own host: subscriptions move, waiting forwards are made there under their keys.
 */
import { systemClock } from "../base/clock.ts";
import type { Json } from "../base/json.ts";
import { ConnectionLost } from "../errors.ts";
import type { LeaseBook } from "../follow/arbiter.ts";
import { type CopyService, createCopyService, FORWARD_RESEND_MS } from "../follow/copy-service.ts";
import { linkHolder } from "../follow/forwarding.ts";
import { heldByOf } from "../follow/lease-holder.ts";
import type { ObjectEnd } from "../follow/object-end.ts";
import { DEVICE_PAGE_CALLS, linkPageCalls } from "../follow/page-call-relay.ts";
import { createHost, type HostOptions, type ServedHost } from "../host/host.ts";
import type { Storage } from "../storage/storage.ts";

export interface ObjectCopyOptions {
  database: string;
  /** The copy's storage (the same the object's harness opens on at the takeover). */
  storage: Promise<Storage>;
  /** The object's harness options: the copy's harness opens with them, read-only. */
  harness: HostOptions["harness"];
  /**
   * The app's methods (`client.call`), served on the copy too: one that only reads answers from the copy, one that
   * writes is `RunsElsewhere` (the copy's harness is read-only).
   */
  methods?: HostOptions["methods"];
  book: LeaseBook;
  /** The object's own place in the lease (its status names the holder `object` when it is this one). */
  place: string;
  /** The object's end, once it started (the forwards go through it). */
  end: () => Promise<ObjectEnd> | undefined;
  /** Whether the object is in its switch (`ObjectEnd.switching`): pages are answered `NotReady` there (decision 0139). */
  switching?: () => boolean;
}

/** The copy's host and the service pages get (`copy.service`); `listenerCount` of the copy's host. */
export function objectCopy(options: ObjectCopyOptions): { copy: CopyService; listenerCount(): number } {
  const callTab = (topic: string, method: string, args: Json[]) => {
    const end = options.end();
    return end ? end.then((started) => started.call(topic, method, args)) : Promise.reject(new ConnectionLost());
  };
  // A device's page tool calls go to the tab that holds the lease (decision 0044), sent again each second while the
  // tab cannot be reached, until this object holds the lease (then its own host answers them).
  const pageCalls = linkPageCalls({
    call: callTab,
    topic: DEVICE_PAGE_CALLS,
    stopped: () => copy.holding,
    pause: () => new Promise((resume) => systemClock.setTimer(FORWARD_RESEND_MS, resume)),
  });
  const host: ServedHost = createHost({
    database: options.database,
    openStorage: () => options.storage,
    harness: { ...options.harness, clock: systemClock, readOnly: true },
    follows: true, // a page's watch of a conversation the tab has not pushed yet waits for it (decision 0107)
    ...(options.methods ? { methods: options.methods } : {}),
    crashPoints: false,
    now: systemClock.now,
    pageCallsElsewhere: () => (copy.holding ? undefined : pageCalls),
  });
  const { book } = options;
  const copy: CopyService = createCopyService({
    copy: host,
    holder: linkHolder(callTab),
    clock: systemClock,
    newKey: () => crypto.randomUUID(), // the core is given its random source (decision 0078)
    where: () => `${book.record.holder ?? "no place"} (lease epoch ${book.record.epoch})`,
    // The object's host is told the holder from its own LeaseBook, as a tab is from the object (decision 0067).
    heldBy: () => heldByOf(book.record, options.place),
    ...(options.switching ? { switching: options.switching } : {}),
  });
  return { copy, listenerCount: host.listenerCount };
}
