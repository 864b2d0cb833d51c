// Drives the web console in Debian's chromium (headless) with playwright-core, for the tests in
// this folder and benchmarks/console.py. Usage:
//
//   node drive.mjs '{"scenario": "...", "base": "http://127.0.0.1:PORT", "out": "DIR", ...}'
//
// Each scenario clicks through pages and actions, checks what the page shows, saves
// screenshots as DIR/NN-name.png, and writes what it saw to DIR/results.json for the Python
// test to compare with the cluster (over the Kafka protocol). A failed check exits non-zero
// with the reason on stderr, after a screenshot of the page as it was.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const options = JSON.parse(process.argv[2]);
const CHROMIUM = options.chromium || "/usr/bin/chromium";
const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
const TIMEOUT_MS = options.timeout_ms || 30000;
const results = { steps: [] };
let shot = 0;

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

async function screenshot(page, name) {
  shot += 1;
  const path = join(options.out, `${String(shot).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  results.steps.push(name);
  return path;
}

async function go(page, hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForSelector("main:not([aria-busy])");
}

// Confirm the dialog the last click opened; the page then shows a notice or an error.
async function confirm(page, name) {
  await page.waitForSelector("dialog#confirm[open]");
  await screenshot(page, `confirm-${name}`);
  // Hide the outcome of the previous action first, so the wait below sees this one's (the
  // page clears them too, but only once the dialog's close event has been handled).
  await page.evaluate(() => {
    for (const id of ["notice", "error"]) document.getElementById(id).hidden = true;
  });
  await page.click("#confirm-ok");
  await page.waitForSelector("#notice:not([hidden]), #error:not([hidden])");
  await page.waitForSelector("main:not([aria-busy])");
  const error = await page.locator("#error").isVisible() ? await page.textContent("#error") : null;
  const notice = await page.locator("#notice").isVisible() ? await page.textContent("#notice") : null;
  return { error, notice };
}

async function cells(page, selector) {
  return page.$$eval(selector, (rows) => rows.map((r) => [...r.cells].map((c) => c.innerText.trim())));
}

// -- scenarios -------------------------------------------------------------------------------

async function full(page) {
  const { topic, groups, records } = options;

  // Brokers and the controller.
  await go(page, "#/");
  await page.waitForSelector("tr[data-broker]");
  const brokerRows = await cells(page, "tr[data-broker]");
  results.brokers = brokerRows.map((r) => Number(r[0]));
  results.controller_shown = await page.locator("tr[data-broker] .badge", { hasText: "controller" }).count();
  await page.click("tr[data-broker] button");
  await page.waitForSelector("tr[data-config='log.dirs']");
  await screenshot(page, "brokers");

  // Topics, and a topic made through the console.
  await page.click("nav a[data-page=topics]");
  await page.waitForSelector(`tr[data-topic='${topic}']`);
  results.topic_row = (await cells(page, `tr[data-topic='${topic}']`))[0];
  await page.fill("#create-topic input[name=name]", "bad name!");
  await page.click("#create-topic button");
  const refused = await confirm(page, "create-bad-topic");
  results.bad_name_error = refused.error;
  await page.fill("#create-topic input[name=name]", "console-made");
  await page.fill("#create-topic input[name=partitions]", "2");
  await page.fill("#create-topic input[name=configs]", "retention.ms=3600000");
  await page.click("#create-topic button");
  results.create = await confirm(page, "create-topic");
  await page.waitForSelector("tr[data-topic='console-made']");
  await screenshot(page, "topics");

  // A topic's partitions and configs; a config altered.
  await page.click(`tr[data-topic='${topic}'] a`);
  await page.waitForSelector("tr[data-partition]");
  results.partitions = await cells(page, "tr[data-partition]");
  await page.click("tr[data-config='retention.ms'] button");
  await page.fill("#config-value", "7200000");
  await page.click("#edit-config button[type=submit]");
  results.alter = await confirm(page, "alter-config");
  results.retention_shown = (await cells(page, "tr[data-config='retention.ms']"))[0][1];
  await screenshot(page, "topic");

  // The message browser: from an offset, as text, JSON and hex; from a timestamp.
  await page.click("#browse");
  await page.waitForSelector("#browse-form");
  await page.selectOption("#browse-form select[name=partition]", "0");
  await page.selectOption("#browse-form select[name=from]", "offset");
  await page.fill("#browse-form input[name=at]", "0");
  await page.fill("#browse-form input[name=limit]", String(records.count));
  await page.click("#browse-form button");
  await page.waitForFunction((n) => document.querySelectorAll("#records-table tr[data-offset]").length === n, records.count);
  results.text_rows = await cells(page, "#records-table tr[data-offset]");
  await screenshot(page, "messages-text");
  await page.selectOption("#browse-form select[name=format]", "json");
  await page.waitForFunction(() => document.querySelector("#records-table td.value pre")?.innerText.includes("\n"));
  results.json_first_value = await page.innerText("#records-table tr[data-offset] td.value");
  await screenshot(page, "messages-json");
  await page.selectOption("#browse-form select[name=format]", "hex");
  await page.waitForFunction(() => /^[0-9a-f]{2} /.test(document.querySelector("#records-table td.value pre")?.innerText || ""));
  results.hex_first_value = await page.innerText("#records-table tr[data-offset] td.value");
  await screenshot(page, "messages-hex");
  await page.selectOption("#browse-form select[name=format]", "text");
  await page.selectOption("#browse-form select[name=from]", "timestamp");
  await page.fill("#browse-form input[name=at]", String(records.timestamp_of_5));
  await page.fill("#browse-form input[name=limit]", "3");
  await page.click("#browse-form button");
  await page.waitForFunction(() => document.querySelectorAll("#records-table tr[data-offset]").length === 3);
  results.timestamp_rows = await cells(page, "#records-table tr[data-offset]");

  // Delete records.
  await go(page, `#/topic/${topic}`);
  await page.selectOption("#delete-records select[name=partition]", "0");
  await page.fill("#delete-records input[name=before]", "3");
  await page.click("#delete-records button");
  results.delete_records = await confirm(page, "delete-records");
  results.partition0_after_delete = (await cells(page, "tr[data-partition='0']"))[0];

  // Consumer groups: the list, one group, and a reset of each kind.
  await page.click("nav a[data-page=groups]");
  await page.waitForSelector("tr[data-group]");
  results.groups = (await cells(page, "tr[data-group]")).map((r) => r[0]);
  await screenshot(page, "groups");
  results.resets = {};
  for (const [group, to, value] of groups) {
    await go(page, `#/group/${group}`);
    await page.waitForSelector("#group-offsets");
    results.resets[group] = { before: await cells(page, "#group-offsets tr[data-tp]") };
    await page.selectOption("#reset-offsets select[name=topic]", topic);
    await page.selectOption("#reset-offsets select[name=to]", to);
    if (value != null) await page.fill("#reset-offsets input[name=value]", String(value));
    await page.click("#reset-offsets button");
    results.resets[group].plan = await page.waitForSelector("dialog#confirm[open] table")
      .then(() => cells(page, "dialog#confirm tbody tr"));
    results.resets[group].outcome = await confirm(page, `reset-${to}`);
    results.resets[group].after = await cells(page, "#group-offsets tr[data-tp]");
    await screenshot(page, `group-${group}`);
  }
  if (options.member_group) {
    await go(page, `#/group/${options.member_group}`);
    await page.waitForSelector("#members");
    results.members = await cells(page, "#members tbody tr");
    await page.selectOption("#reset-offsets select[name=to]", "earliest");
    await page.click("#reset-offsets button");
    results.member_group_reset = await confirm(page, "reset-active-group");
    await screenshot(page, "group-with-members");
  }

  // Live rates: the test produces into the topic while the page samples.
  await page.click("nav a[data-page=live]");
  await page.waitForFunction((t) => {
    const cell = document.querySelector(`#live-topics tr[data-name='${t}'] td.rate`);
    return cell && Number(cell.innerText) > 0;
  }, options.live_topic, { timeout: TIMEOUT_MS });
  results.live_rate = (await cells(page, `#live-topics tr[data-name='${options.live_topic}']`))[0][1];
  await screenshot(page, "live");

  // Delete the topic made above.
  await go(page, "#/topic/console-made");
  await page.click("#delete-topic");
  results.delete_topic = await confirm(page, "delete-topic");
  await page.waitForSelector(`tr[data-topic='${topic}']`);
  results.topics_after_delete = (await cells(page, "tr[data-topic]")).map((r) => r[0]);
}

async function acl(page) {
  const { topic } = options;
  await go(page, `#/topic/${topic}`);
  await page.waitForSelector("tr[data-partition]");
  await page.click("#delete-topic");
  results.delete_topic = await confirm(page, "delete-topic-refused");
  await screenshot(page, "acl-delete-refused");
  await page.click("tr[data-config='retention.ms'] button");
  await page.fill("#config-value", "1000");
  await page.click("#edit-config button[type=submit]");
  results.alter = await confirm(page, "alter-refused");
  await screenshot(page, "acl-alter-refused");
}

// The schema registry's page: the subjects, a subject's versions, a version's text and the diff
// between two versions.
async function schemas(page) {
  const { subject } = options;
  await page.click("nav a[data-page=schemas]");
  await page.waitForSelector(`tr[data-subject='${subject}']`);
  results.subjects = await cells(page, "tr[data-subject]");
  results.global_compatibility = await page.textContent(".compat-global");
  await screenshot(page, "schemas");
  await page.click(`tr[data-subject='${subject}'] a`);
  await page.waitForSelector("#schema-diff");
  results.versions = await cells(page, "tr[data-version]");
  results.subject_compatibility = await page.textContent(".compat-subject");
  results.latest_text = await page.innerText("#schema-text pre");
  results.diff = await page.innerText("#schema-diff");
  await screenshot(page, "schema-diff");
  await page.click("tr[data-version='1'] button");
  await page.waitForSelector("tr[data-version='1'].selected");
  results.first_text = await page.innerText("#schema-text pre");
  await page.selectOption("#diff-from", "2");
  await page.selectOption("#diff-to", "2");
  await page.click("#schema-diff-form button");
  await page.waitForSelector("p#schema-diff");
  results.same_diff = await page.innerText("#schema-diff");
  await screenshot(page, "schema-same");
}

// The schema page of a console with no registry beside it.
async function noSchemas(page) {
  await page.click("nav a[data-page=schemas]");
  await page.waitForSelector("#no-registry");
  results.no_registry = await page.textContent("#no-registry");
  results.error_shown = await page.locator("#error").isVisible();
  await screenshot(page, "no-registry");
}

// The topic list with every topic drawn, timed from navigation to the last row.
async function bench(page) {
  const times = [];
  for (let i = 0; i < (options.repeat || 5); i++) {
    await go(page, "#/");
    const started = performance.now();
    await go(page, "#/topics");
    await page.waitForFunction((n) => document.querySelectorAll("#topics tbody tr").length >= n, options.topics);
    times.push(performance.now() - started);
    await page.waitForFunction(() => window.lastRoute?.hash === "#/topics" && window.lastRoute.shown_ms !== undefined);
    const inPage = await page.evaluate(() => window.lastRoute);
    if (inPage) (results.in_page ||= []).push(inPage);
  }
  results.topics_page_ms = times;
  await page.goto("about:blank");
  const started = performance.now();
  await page.goto(options.base + "/#/topics", { waitUntil: "load" });
  await page.waitForFunction((n) => document.querySelectorAll("#topics tbody tr").length >= n, options.topics);
  results.cold_topics_page_ms = performance.now() - started;
  await screenshot(page, "bench-topics");
}

// -- main ------------------------------------------------------------------------------------

const profile = mkdtempSync(join(tmpdir(), "odradek-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 900 },
});
let status = 0;
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(TIMEOUT_MS);
  page.on("pageerror", (error) => { results.page_errors = [...(results.page_errors || []), String(error)]; });
  // The first load's weight: what came over the wire (headers and encoded bodies).
  const requests = [];
  page.on("requestfinished", (request) => requests.push(request));
  await page.goto(options.base + "/", { waitUntil: "load" });
  await page.waitForSelector("main:not([aria-busy])");
  let transferred = 0;
  for (const request of requests) {
    const sizes = await request.sizes();
    transferred += sizes.responseBodySize + sizes.responseHeadersSize;
  }
  results.first_load = { requests: requests.map((r) => r.url()), bytes: transferred };
  await { full, acl, bench, schemas, noSchemas }[options.scenario](page);
} catch (error) {
  status = 1;
  results.failure = String(error.stack || error);
  console.error(results.failure);
  try { await context.pages()[0]?.screenshot({ path: join(options.out, "failure.png"), fullPage: true }); }
  catch { /* the page is gone */ }
} finally {
  writeFileSync(join(options.out, "results.json"), JSON.stringify(results, null, 2));
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(status);
