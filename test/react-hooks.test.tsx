// @vitest-environment happy-dom
import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { memo, StrictMode, useEffect } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { HarnessClient } from "../src/browser/client.ts";
import type { ConversationViewState, TaskRecord } from "../src/index.ts";
import {
  HarnessProvider,
  NoHarnessProvider,
  useConversation,
  useHarnessStatus,
  useReports,
  useSubmit,
  useTasks,
} from "../src/react/index.ts";
import { FakeClient, snapshot } from "./react-fake-client.ts";

afterEach(() => {
  cleanup();
  vi.restoreAllMocks();
});

const task = (id: number, kind: string, status: "running" | "pending" = "running"): TaskRecord => ({
  id,
  conversationId: 1,
  kind,
  version: 1,
  input: null,
  background: false,
  abortRequested: false,
  state: { status, checkpoint: { phase: "run" } },
});

function Status() {
  const { status, requestTakeover } = useHarnessStatus();
  return (
    <p>
      <span data-testid="status">{status.kind}</span>
      {status.kind === "waiting-for-lock" && (
        <button type="button" onClick={() => void requestTakeover()}>
          Take over here
        </button>
      )}
    </p>
  );
}

function Entries({ id }: { id: number }) {
  const view = useConversation(id);
  if (!view) return <p>loading</p>;
  return <p data-testid="entries">{view.entries.map((entry) => (entry.payload as { text: string }).text).join(",")}</p>;
}

function Tasks({ kind }: { kind?: string }) {
  const tasks = useTasks(kind ? { kind } : undefined);
  return <p data-testid="tasks">{tasks.map((record) => record.id).join(",")}</p>;
}

function Reports() {
  const reports = useReports();
  return <p data-testid="reports">{reports.map((report) => (report.kind === "error" ? "error" : report.taskId)).join(",")}</p>;
}

/** Everything at once, for the leak and StrictMode checks. */
function All() {
  return (
    <>
      <Status />
      <Entries id={1} />
      <Tasks />
      <Reports />
    </>
  );
}

const flush = () => act(async () => {});

describe("pi-durable-web/react hooks", () => {
  it("useHarnessStatus follows the client's status, and requestTakeover asks the owner to let go", async () => {
    const client = new FakeClient();
    render(
      <HarnessProvider client={client}>
        <Status />
      </HarnessProvider>,
    );
    expect(screen.getByTestId("status").textContent).toBe("starting");
    act(() => client.setStatus({ kind: "waiting-for-lock", database: "app.db" }));
    expect(screen.getByTestId("status").textContent).toBe("waiting-for-lock");
    fireEvent.click(screen.getByText("Take over here"));
    expect(client.calls.requestTakeover).toBe(1);
    act(() => client.setStatus({ kind: "ready", database: "app.db", recovered: [], recovery: { stop: "none", tasks: [] }, openMs: 3 }));
    expect(screen.getByTestId("status").textContent).toBe("ready");
  });

  it("useConversation shows the snapshot, then each delta; the state is the same object until an update arrives", async () => {
    const client = new FakeClient();
    const seen: ConversationViewState[] = [];
    const Probe = memo(function Probe({ tick }: { tick: number }) {
      const view = useConversation(1);
      if (view) seen.push(view);
      return <p data-testid="probe">{tick}</p>;
    });
    const { rerender } = render(
      <HarnessProvider client={client}>
        <Entries id={1} />
        <Probe tick={0} />
      </HarnessProvider>,
    );
    expect(screen.getByText("loading")).toBeTruthy();
    await act(async () => client.view(1, snapshot(1, [{ id: 1, text: "a" }])));
    expect(screen.getByTestId("entries").textContent).toBe("a");
    rerender(
      <HarnessProvider client={client}>
        <Entries id={1} />
        <Probe tick={1} />
      </HarnessProvider>,
    );
    rerender(
      <HarnessProvider client={client}>
        <Entries id={1} />
        <Probe tick={2} />
      </HarnessProvider>,
    );
    const beforeUpdate = seen.at(-1)!;
    expect(seen.slice(-3).every((state) => state === beforeUpdate)).toBe(true);
    act(() => client.view(1, { type: "commit", entries: [{ id: 2, conversationId: 1, kind: "app.note", payload: { text: "b" }, at: 2 }] }));
    expect(screen.getByTestId("entries").textContent).toBe("a,b");
    expect(seen.at(-1)).not.toBe(beforeUpdate);
    expect(seen.at(-1)!.entries).toHaveLength(2);
  });

  it("useTasks filters the pushed task graph and keeps the same array until it changes; useReports accumulates reports", async () => {
    const client = new FakeClient();
    render(
      <HarnessProvider client={client}>
        <Tasks kind="app.job" />
        <Reports />
      </HarnessProvider>,
    );
    await flush();
    act(() =>
      client.tasks({
        scheduling: "running",
        recovery: { stop: "none", tasks: [] },
        approvals: [],
        pageCalls: [],
        tasks: [
          { record: task(1, "app.job"), state: "running" as never },
          { record: task(2, "pi.generation"), state: "running" as never },
        ],
      }),
    );
    expect(screen.getByTestId("tasks").textContent).toBe("1");
    act(() =>
      client.report({ kind: "task_interrupted", taskId: 7, taskKind: "pi.tool", conversationId: 1, reason: "interrupted", message: "cut" }),
    );
    act(() => client.report({ kind: "error", error: "boom" }));
    expect(screen.getByTestId("reports").textContent).toBe("7,error");
  });

  it("useSubmit submits an input with a requestId (the caller's, or a fresh one)", async () => {
    const client = new FakeClient();
    let submit!: ReturnType<typeof useSubmit>;
    function Composer() {
      submit = useSubmit(1);
      return null;
    }
    render(
      <HarnessProvider client={client}>
        <Composer />
      </HarnessProvider>,
    );
    await submit("hello", { requestId: "r-1" });
    await submit("again");
    expect(client.calls.submit[0]).toEqual([1, { type: "input", content: "hello", requestId: "r-1" }]);
    expect(client.calls.submit[1]![1]).toMatchObject({ type: "input", content: "again", requestId: expect.any(String) });
    expect((client.calls.submit[1]![1] as { requestId: string }).requestId).not.toBe("r-1");
  });

  it("every subscription ends on unmount: no listener is left, also when the unmount comes before the host answered", async () => {
    const client = new FakeClient();
    const first = render(
      <HarnessProvider client={client}>
        <All />
      </HarnessProvider>,
    );
    await act(async () => client.view(1, snapshot(1)));
    expect(client.listenerCount()).toBe(4); // status, view, tasks, reports
    first.unmount();
    expect(client.listenerCount()).toBe(0);

    client.hold();
    const second = render(
      <HarnessProvider client={client}>
        <All />
      </HarnessProvider>,
    );
    second.unmount();
    await act(async () => client.release());
    // The host answers the conversation's subscription with its snapshot; the view opened for nobody closes.
    await act(async () => client.view(1, snapshot(1)));
    await flush();
    expect(client.listenerCount()).toBe(0);
  });

  it("StrictMode's double mount makes one worker and no task or submission; the provider closes its client once, on unmount", async () => {
    const close = vi.spyOn(HarnessClient.prototype, "close").mockResolvedValue(undefined);
    const workers: Worker[] = [];
    const makeWorker = () => {
      const worker = { postMessage() {}, addEventListener() {}, removeEventListener() {}, terminate: vi.fn() } as unknown as Worker;
      workers.push(worker);
      return worker;
    };
    const submitted: unknown[] = [];
    function Effects() {
      const submit = useSubmit(1);
      useEffect(() => {
        submitted.push(submit);
      }, [submit]);
      return null;
    }
    const view = render(
      <StrictMode>
        <HarnessProvider worker={makeWorker}>
          <Status />
          <Tasks />
          <Effects />
        </HarnessProvider>
      </StrictMode>,
    );
    await flush();
    expect(workers).toHaveLength(1);
    expect(close).not.toHaveBeenCalled();
    expect(workers[0]!.terminate).not.toHaveBeenCalled();
    view.unmount();
    await flush();
    expect(close).toHaveBeenCalledTimes(1);
    expect(workers[0]!.terminate).toHaveBeenCalledTimes(1);
    expect(workers).toHaveLength(1);
  });

  it("StrictMode with a given client: no submission or task is made by mounting, and no listener is left after unmount", async () => {
    const client = new FakeClient();
    const view = render(
      <StrictMode>
        <HarnessProvider client={client}>
          <All />
        </HarnessProvider>
      </StrictMode>,
    );
    await act(async () => client.view(1, snapshot(1)));
    expect(client.calls.submit).toEqual([]);
    expect(client.listenerCount()).toBe(4);
    view.unmount();
    await flush();
    expect(client.listenerCount()).toBe(0);
    expect(client.calls.close).toBe(0);
  });

  it("a hook outside <HarnessProvider> throws NoHarnessProvider, saying what to do", () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    expect(() => render(<Status />)).toThrow(NoHarnessProvider);
    expect(() => render(<Status />)).toThrow(/wrap the app/);
  });
});
