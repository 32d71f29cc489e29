import { expect, type Page, test } from "@playwright/test";

const url = () => process.env.REACT_CHAT_URL!;
const users = (page: Page) => page.locator('ol[aria-label="messages"] > li[data-role="user"]');
const assistants = (page: Page) => page.locator('ol[aria-label="messages"] > li[data-role="assistant"]');

async function open(page: Page): Promise<void> {
  await page.goto(url());
  await expect(page.getByTestId("status")).toHaveText("ready");
  await expect(page.getByRole("button", { name: "Send" })).toBeEnabled();
}

async function send(page: Page, text: string): Promise<void> {
  await page.getByRole("textbox", { name: "message" }).fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

test("every tab's useChat shows what another tab sent and its answer, without a reload (transport.onTranscriptChange)", async ({
  page,
  context,
}) => {
  await open(page);
  const second = await context.newPage(); // the same origin: a follower tab, reaching the first tab's worker
  await open(second);

  await send(page, "hello from the first tab");
  await expect(users(second)).toHaveText(["hello from the first tab"]);
  await expect(assistants(second)).toContainText('You said "hello from the first tab"');

  await send(second, "and from the second");
  await expect(users(page)).toHaveText(["hello from the first tab", "and from the second"]);
  await expect(assistants(page).nth(1)).toContainText('You said "and from the second"');
  await expect(assistants(page)).toHaveCount(2);
  await expect(assistants(second)).toHaveCount(2);
});
