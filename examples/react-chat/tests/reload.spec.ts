import { expect, type Page, test } from "@playwright/test";

const url = () => process.env.REACT_CHAT_URL!;
const users = (page: Page) => page.locator('ol[aria-label="messages"] > li[data-role="user"]');
const assistants = (page: Page) => page.locator('ol[aria-label="messages"] > li[data-role="assistant"]');

async function send(page: Page, text: string): Promise<void> {
  await page.getByRole("textbox", { name: "message" }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

test.beforeEach(async ({ page }) => {
  await page.goto(url());
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
});

test("S9 a reload mid-answer: useChat shows the kept partial, the retry's whole answer, and each message once", async ({ page }) => {
  await send(page, "tell me a story");
  const answer = assistants(page).locator("p.text").first();
  // Past persistWithinMs (1 s) of streaming, so the partial is durable, and far from the end (about 5 s).
  await expect.poll(async () => (await answer.textContent())?.length ?? 0).toBeGreaterThan(100);
  await expect(assistants(page)).not.toContainText("comes again, once.");
  await page.reload();

  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(assistants(page)).toContainText("(cut off", { timeout: 20_000 });
  await expect(assistants(page)).toContainText("and then the whole story comes again, once.", { timeout: 30_000 });
  await expect(page.getByTestId("chat-status")).toHaveText("ready");
  await expect(users(page)).toHaveCount(1);
  await expect(users(page)).toHaveText("tell me a story");
  await expect(assistants(page)).toHaveCount(1);
});

test("S8 a reload mid-tool: useChat shows the interrupted tool, the model's answer to it, and each message once; the task list shows the tool running before", async ({
  page,
}) => {
  await send(page, "countdown please");
  await expect(assistants(page).locator("pre.tool")).toContainText("tick 6", { timeout: 20_000 });
  await expect(page.getByRole("list", { name: "tasks" })).toContainText("pi.tool running");
  // The tool's output is persisted within persistWithinMs (1 s); a reload after it keeps what it had said.
  await expect(assistants(page).locator("pre.tool")).toContainText("tick 4", { timeout: 20_000 });
  await page.reload();

  await expect(page.getByTestId("status")).toHaveText("ready");
  const tool = assistants(page).locator("pre.tool");
  await expect(tool).toHaveAttribute("data-state", "output-error", { timeout: 20_000 });
  await expect(tool).toContainText("Tool countdown was interrupted and may have partially run");
  await expect(assistants(page)).toContainText("(countdown was interrupted by a reload)");
  await expect(assistants(page)).toContainText("The countdown was cut off", { timeout: 20_000 });
  await expect(page.getByTestId("chat-status")).toHaveText("ready");
  await expect(users(page)).toHaveCount(1);
  await expect(assistants(page)).toHaveCount(1);
  await expect(page.getByRole("list", { name: "tasks" })).not.toContainText("pi.tool running");
});

test("a failed answer stays failed: useChat's error on load, and after a later answer and a reload the failure is still shown", async ({
  page,
}) => {
  await send(page, "please fail");
  await expect(assistants(page)).toContainText("(no answer: 400 the demo model refuses on purpose)");
  await expect(page.getByTestId("chat-error")).toHaveText("400 the demo model refuses on purpose");

  await page.reload();
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(assistants(page)).toContainText("(no answer: 400 the demo model refuses on purpose)");
  await expect(page.getByTestId("chat-error")).toHaveText("400 the demo model refuses on purpose");

  await send(page, "hello again");
  await expect(assistants(page).nth(1)).toContainText('You said "hello again"');
  await expect(page.getByTestId("chat-error")).toHaveCount(0);
  await page.reload();
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(assistants(page)).toHaveCount(2);
  await expect(assistants(page).first()).toContainText("(no answer: 400 the demo model refuses on purpose)");
  await expect(page.getByTestId("chat-error")).toHaveCount(0);
});
