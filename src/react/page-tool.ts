import { useEffect, useRef, useState } from "react";
import type { PageToolResult } from "../agent/tasks/page-calls.ts";
import type { Json } from "../base/json.ts";
import type { PageToolCall, PageToolImplementation } from "../host/page-tools.ts";
import type { HarnessStatus } from "../host/status.ts";
import type { ReactHarnessClient } from "./client.ts";
import { useHarnessClient } from "./provider.ts";

/** A page tool call this page claimed and runs now (decision 0028). */
export interface PageToolRequest {
  callId: string;
  toolName: string;
  arguments: { [key: string]: Json };
  /** 1 for the first run; more when a safe tool runs again after a reload cut the last run off. */
  attempt: number;
  /**
   * Answers the call with its result (once; later answers are ignored). Present when `usePageTool` was given
   * no implementation: the page answers from its UI (a form, a choice) — "ask the person".
   */
  respond?: (result: PageToolResult) => void;
}

/**
 * Whether the client has ended for good (decision 0150): the page closed it, or its host is gone (`WorkerGone`, the
 * worker terminated or crashed). Nothing carries a provision past that. Every other status after `ready` (opening,
 * recovering, reconnecting, failed, waiting for the lock, closed by a takeover) may be a blink or a move that the
 * transport carries the provision across; the host says whether the claims held through it.
 */
function endedForGood(status: HarnessStatus): boolean {
  return (status.kind === "closed" && status.reason === "close") || (status.kind === "failed" && status.error.name === "WorkerGone");
}

/**
 * Provides page tool `name` to conversation `conversationId` while the component is mounted. A waiting call is
 * claimed for this page (the first page wins) and then runs `implementation`; without one, the call waits for
 * the UI: the hook returns it with `respond(result)` (a form or a choice for the person). Returns the calls this
 * page runs now. A reload or a closed tab while a call runs follows the tool's replay policy (unsafe: the model
 * gets an interrupted result; safe: the next page that provides it runs it again). A watch of the calls the host
 * refuses when the transport asks it again throws the host's error into the nearest error boundary (decision 0114).
 *
 * The tool is provided from the client's first `ready` on and kept across later statuses (decision 0150): the
 * transport carries the watch across a reconnect or a database move, and a call whose claim did not hold keeps its
 * form until the host says so (its list no longer shows the claim: the request goes, the call follows its replay
 * policy). Let go at unmount, a change of client, conversation or name, a refusal (above), and once the client has
 * ended for good (closed by the page, its worker gone).
 *
 *   const asks = usePageTool(conversationId, "ask_person");
 *   return asks.map((ask) => <Choice key={ask.callId} question={ask.arguments.question} onPick={ask.respond!} />);
 */
export function usePageTool(conversationId: number | undefined, name: string, implementation?: PageToolImplementation): PageToolRequest[] {
  const client = useHarnessClient<ReactHarnessClient>();
  const latest = useRef(implementation);
  latest.current = implementation;
  const [requests, setRequests] = useState<PageToolRequest[]>([]);
  const [lost, setLost] = useState<{ conversationId: number; error: Error }>();
  useEffect(() => {
    if (!client || conversationId === undefined) return;
    let stop: (() => void) | undefined;
    /** A provision asked and not answered yet. */
    let asking = false;
    let unmounted = false;
    /** Removes this run's request (by identity: a safe call run again here under the same call id keeps its own). */
    const remove = (request: PageToolRequest) => setRequests((all) => all.filter((one) => one !== request));
    const show = (request: PageToolRequest) => setRequests((all) => [...all.filter((one) => one.callId !== request.callId), request]);
    const run: PageToolImplementation = (args, call: PageToolCall) => {
      // Already ended (the provision stopped while its claim was in flight): no form, nothing run; what it returns is
      // never sent (decision 0150's review, M1).
      if (call.signal.aborted) return "";
      const given = latest.current;
      const base: PageToolRequest = { callId: call.callId, toolName: call.toolName, arguments: args, attempt: call.attempt };
      let request = base;
      let settle: ((result: PageToolResult) => void) | undefined;
      const answered = given
        ? Promise.resolve().then(() => given(args, call))
        : new Promise<PageToolResult>((resolve) => {
            let once = false;
            settle = (result: PageToolResult) => {
              if (once) return;
              once = true;
              resolve(result);
            };
            request = { ...base, respond: settle };
          });
      show(request);
      // The host ended this run's claim (released, the call ended): its form goes, and an unanswered form's wait ends
      // (nothing is sent under an aborted run).
      call.signal.addEventListener(
        "abort",
        () => {
          remove(request);
          settle?.("");
        },
        { once: true },
      );
      return answered.finally(() => remove(request));
    };
    const letGo = () => {
      stop?.();
      stop = undefined;
      setRequests([]);
    };
    // Lost (the host refused the page's watch of its calls again, decision 0114): thrown into the error boundary.
    const onLost = (error: Error) => !unmounted && setLost({ conversationId, error });
    const consider = (status: HarnessStatus) => {
      if (unmounted) return;
      if (endedForGood(status)) return letGo();
      // Provided at the first ready, and at a later one only if the last ask failed (the host was not open yet).
      if (status.kind !== "ready" || stop || asking) return;
      asking = true;
      client.providePageTools(conversationId, { [name]: run }, { onLost }).then(
        (unsubscribe) => {
          asking = false;
          if (unmounted || endedForGood(client.status)) unsubscribe();
          else stop = unsubscribe;
        },
        () => {
          asking = false;
        },
      );
    };
    consider(client.status);
    const unwatch = client.onStatus(consider);
    return () => {
      unmounted = true;
      unwatch();
      letGo();
    };
  }, [client, conversationId, name]);
  if (lost && lost.conversationId === conversationId) throw lost.error;
  return requests;
}
