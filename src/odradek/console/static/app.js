// The odradek web console: one page, routed by the URL's hash, drawn with the DOM API from the
// JSON of /api/ (see odradek/console/api.py). No framework and no build step: h() below is
// all the templating there is, and each page is a function that fetches and draws.

const main = document.getElementById("main");
const errorBox = document.getElementById("error");
const noticeBox = document.getElementById("notice");
let stopPage = () => {};
let keepMessages = false; // a change that moves to another page keeps its outcome shown

// -- helpers -------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "value" || key === "checked") el[key] = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function table(headers, rows, attrs) {
  return h("table", attrs,
    h("thead", null, h("tr", null, headers.map((c) => h("th", numeric(c) ? { class: "num" } : null, c)))),
    h("tbody", null, rows));
}

const NUMERIC = /^(Partitions|Replication|Size|Leaders|Start|End|Committed|Lag|Offset|Rate|Records|Epoch|Port|Partition|ID|msgs\/s)/;
function numeric(header) { return NUMERIC.test(header); }
function num(value) { return h("td", { class: "num" }, value == null ? "–" : value); }

function bytes(n) {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function enc(part) { return encodeURIComponent(part); }

async function api(method, path, body) {
  const response = await fetch("/api/" + path, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let answer;
  try { answer = await response.json(); } catch { answer = { error: response.statusText }; }
  if (!response.ok) {
    throw Object.assign(new Error(`${answer.error || response.statusText} (HTTP ${response.status})`),
      { status: response.status });
  }
  return answer;
}

function showError(error) {
  errorBox.textContent = String(error.message || error);
  errorBox.hidden = false;
}

function showNotice(text) {
  noticeBox.textContent = text;
  noticeBox.hidden = false;
}

function clearMessages() { errorBox.hidden = true; noticeBox.hidden = true; }

// A confirmation for every change: resolves true when the user confirms.
function confirmAction(title, body) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-body").replaceChildren(body instanceof Node ? body : h("p", null, body));
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

// Confirm, run the change, show its outcome, then redraw the page.
async function act(title, body, change, done) {
  if (!(await confirmAction(title, body))) return;
  clearMessages();
  try {
    const result = await change();
    showNotice(done(result));
  } catch (error) {
    showError(error);
    return;
  }
  await route(false);
}

function field(label, input) { return h("label", null, label, input); }

// Milliseconds from "1700000000000" or a date such as 2026-11-23T10:00:00Z (local time without a zone).
function parseTime(text) {
  text = text.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) throw new Error(`${text} is neither milliseconds nor a date`);
  return ms;
}

// -- record formats --------------------------------------------------------------------------

function decode64(text) {
  if (text == null) return null;
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

const utf8 = new TextDecoder("utf-8");

// Bytes as text, pretty JSON (or the text when it is not JSON) or hex, in a <pre> (or in the
// inline element ``tag``).
function formatBytes(data, format, tag = "pre") {
  if (data == null) return h("span", { class: "muted" }, "null");
  if (format === "hex") {
    return h(tag, null, Array.from(data, (b) => b.toString(16).padStart(2, "0")).join(" "));
  }
  const text = utf8.decode(data);
  if (format === "json") {
    try { return h(tag, null, JSON.stringify(JSON.parse(text), null, 2)); }
    catch { return h(tag, { title: "not JSON" }, text); }
  }
  return h(tag, null, text);
}

// -- pages -----------------------------------------------------------------------------------

async function brokersPage() {
  const cluster = await api("GET", "cluster");
  document.getElementById("bootstrap").textContent = cluster.bootstrap;
  const configs = h("div");
  const showConfigs = async (id) => {
    const list = await api("GET", `brokers/${id}/configs`);
    configs.replaceChildren(h("h3", null, `Broker ${id} configs`), configsTable(list));
  };
  return [
    h("h2", null, "Brokers"),
    h("div", { class: "cards" },
      card("Cluster", cluster.cluster_id || "–"),
      card("Controller", cluster.controller ?? "none"),
      card("Topics", cluster.topics),
      card("Partitions", cluster.partitions),
      card("Under-replicated", cluster.under_replicated, cluster.under_replicated ? "bad" : "ok"),
      card("Offline", cluster.offline, cluster.offline ? "bad" : "ok")),
    table(["ID", "Host", "Port", "Rack", "Leaders", "Role", ""], cluster.brokers.map((b) =>
      h("tr", { "data-broker": b.id },
        num(b.id), h("td", null, b.host), num(b.port), h("td", null, b.rack || "–"),
        num(cluster.leaders[String(b.id)]),
        h("td", null, b.id === cluster.controller ? h("span", { class: "badge" }, "controller") : ""),
        h("td", null, h("button", { onclick: () => showConfigs(b.id).catch(showError) }, "Configs"))))),
    configs,
  ];
}

function card(title, value, cls) {
  return h("div", { class: "card" }, h("span", { class: "muted" }, title), h("b", { class: cls }, value));
}

function configsTable(list, onEdit) {
  return table(["Name", "Value", "Source", ""], list.map((c) =>
    h("tr", { "data-config": c.name },
      h("td", null, c.name),
      h("td", null, c.value ?? h("span", { class: "muted", title: "not set, or sensitive" }, "–")),
      h("td", { class: "muted" }, c.source),
      h("td", null, onEdit && !c.read_only ? h("button", { onclick: () => onEdit(c) }, "Edit") : ""))));
}

async function topicsPage() {
  const topics = await api("GET", "topics");
  const filter = h("input", { placeholder: "filter", id: "topic-filter" });
  const rows = topics.map((t) =>
    h("tr", { "data-topic": t.name },
      h("td", null, h("a", { href: `#/topic/${enc(t.name)}` }, t.name),
        t.internal ? h("span", { class: "badge" }, " internal") : ""),
      num(t.partitions), num(t.replication_factor),
      h("td", { class: t.under_replicated ? "num bad" : "num" }, t.under_replicated),
      h("td", { class: t.offline ? "num bad" : "num" }, t.offline),
      num(bytes(t.size))));
  filter.addEventListener("input", () => {
    const wanted = filter.value.toLowerCase();
    for (const row of rows) row.hidden = !row.dataset.topic.toLowerCase().includes(wanted);
  });
  return [
    h("h2", null, `Topics (${topics.length})`),
    createTopicForm(),
    filter,
    table(["Name", "Partitions", "Replication", "Under-replicated", "Offline", "Size"], rows,
      { id: "topics" }),
  ];
}

function createTopicForm() {
  const name = h("input", { name: "name", required: true, placeholder: "orders" });
  const partitions = h("input", { name: "partitions", type: "number", min: 1, value: "1" });
  const factor = h("input", { name: "replication_factor", type: "number", min: 1, value: "1" });
  const configs = h("input", { name: "configs", placeholder: "retention.ms=86400000, …", size: 30 });
  const submit = (event) => {
    event.preventDefault();
    const pairs = configs.value.split(",").map((s) => s.trim()).filter(Boolean);
    const body = {
      name: name.value.trim(),
      partitions: Number(partitions.value),
      replication_factor: Number(factor.value),
      configs: Object.fromEntries(pairs.map((p) => [p.split("=")[0], p.split("=").slice(1).join("=")])),
    };
    act("Create topic", `Create topic ${body.name} with ${body.partitions} partition(s), ` +
        `replication factor ${body.replication_factor}?`,
      () => api("POST", "topics", body), () => `Created topic ${body.name}.`);
  };
  return h("form", { class: "inline", id: "create-topic", onsubmit: submit },
    field("Name", name), field("Partitions", partitions), field("Replication factor", factor),
    field("Configs", configs), h("button", { class: "primary" }, "Create topic"));
}

async function topicPage(name) {
  const [topic, tables] = await Promise.all([api("GET", `topics/${enc(name)}`), api("GET", "tables")]);
  const translated = tables.filter((t) => t.topic === name);
  const edit = (config) => {
    const value = h("input", { id: "config-value", value: config.value ?? "" });
    const form = h("form", { class: "inline", id: "edit-config" },
      field(config.name, value),
      h("button", { class: "primary", type: "submit" }, "Save"),
      h("button", { type: "button", onclick: () => editor.replaceChildren() }, "Cancel"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = { set: { [config.name]: value.value } };
      act("Alter topic config", `Set ${config.name}=${value.value} on topic ${name}?`,
        () => api("POST", `topics/${enc(name)}/configs`, body),
        () => `Set ${config.name}=${value.value} on ${name}.`);
    });
    editor.replaceChildren(form);
    value.focus();
  };
  const editor = h("div");
  const partitionSelect = h("select", { name: "partition" },
    topic.partitions.map((p) => h("option", { value: String(p.partition) }, p.partition)));
  const before = h("input", { name: "before", type: "number", min: -1, placeholder: "offset" });
  const deleteRecords = h("form", { class: "inline", id: "delete-records" },
    field("Partition", partitionSelect), field("Delete records before offset (-1: all)", before),
    h("button", { class: "danger" }, "Delete records"));
  deleteRecords.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { partition: Number(partitionSelect.value), before: Number(before.value) };
    act("Delete records", `Delete the records of ${name}-${body.partition} before offset ${body.before}?`,
      () => api("POST", `topics/${enc(name)}/delete-records`, body),
      (r) => `${name}-${r.partition}: the log now starts at offset ${r.log_start_offset}.`);
  });
  const deleteTopic = h("button", { class: "danger", id: "delete-topic", onclick: () =>
    act("Delete topic", `Delete topic ${name} and all its records?`,
      () => api("DELETE", `topics/${enc(name)}`),
      () => {
        keepMessages = true;
        location.hash = "#/topics";
        return `Deleted topic ${name}.`;
      }) }, "Delete topic");
  return [
    h("h2", null, `Topic ${name} `, topic.internal ? h("span", { class: "badge" }, "internal") : ""),
    h("p", null, h("a", { href: `#/messages/${enc(name)}`, id: "browse" }, "Browse messages →"), " ",
      deleteTopic),
    h("h3", null, "Partitions"),
    table(["Partition", "Leader", "Epoch", "Replicas", "In-sync replicas", "Start offset", "End offset", "Size"],
      topic.partitions.map((p) => h("tr", { "data-partition": p.partition },
        num(p.partition), h("td", { class: p.leader == null ? "bad" : "" }, p.leader ?? "none"),
        num(p.leader_epoch), h("td", null, p.replicas.join(", ")),
        h("td", { class: p.isr.length < p.replicas.length ? "bad" : "" }, p.isr.join(", ")),
        num(p.start_offset), num(p.end_offset), num(bytes(p.size))))),
    deleteRecords,
    ...(translated.length ? [
      h("h3", null, "Iceberg table"),
      table(["Partition", "Lag (records)", "Lag (seconds)", "Translated", "Dead letters", "Errors"],
        translated.map((t) => h("tr", { "data-table-partition": t.partition },
          num(t.partition), num(t.lag_records), num(t.lag_seconds.toFixed(1)), num(t.translated),
          num(t.dead_letters), num(t.errors)))),
    ] : []),
    h("h3", null, "Configs"),
    editor,
    topic.configs_error ? h("p", { class: "bad" }, topic.configs_error) : configsTable(topic.configs, edit),
  ];
}

async function messagesPage(name) {
  const topic = await api("GET", `topics/${enc(name)}`);
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const partition = h("select", { name: "partition" },
    topic.partitions.map((p) => h("option", { value: String(p.partition) }, p.partition)));
  partition.value = params.get("partition") || "0";
  const from = h("select", { name: "from" },
    h("option", { value: "last" }, "the last records"),
    h("option", { value: "offset" }, "offset"),
    h("option", { value: "timestamp" }, "timestamp (ms or date)"));
  from.value = params.get("from") || "last";
  const at = h("input", { name: "at", value: params.get("at") || "", size: 24 });
  const limit = h("input", { name: "limit", type: "number", min: 1, max: 1000, value: params.get("limit") || "50" });
  const format = h("select", { name: "format" },
    ["text", "json", "hex"].map((f) => h("option", { value: f }, f)));
  format.value = params.get("format") || "text";
  const out = h("div", { id: "records" });
  const load = async () => {
    const query = new URLSearchParams({ partition: partition.value, limit: limit.value });
    if (from.value === "offset") query.set("offset", at.value.trim());
    if (from.value === "timestamp") query.set("timestamp", String(parseTime(at.value)));
    const result = await api("GET", `topics/${enc(name)}/records?${query}`);
    out.replaceChildren(
      h("p", { class: "muted" }, `${result.records.length} record(s) of ${name}-${result.partition} ` +
        `(offsets ${result.start_offset} to ${result.end_offset - 1})`),
      table(["Offset", "Timestamp", "Key", "Value", "Headers"], result.records.map((r) =>
        h("tr", { "data-offset": r.offset },
          num(r.offset),
          h("td", { title: String(r.timestamp) }, new Date(r.timestamp).toISOString()),
          h("td", { class: "key" }, formatBytes(decode64(r.key), format.value)),
          h("td", { class: "value" }, formatBytes(decode64(r.value), format.value)),
          h("td", { class: "headers" }, r.headers.map((x) =>
            h("div", null, `${x.key}: `, formatBytes(decode64(x.value), format.value === "hex" ? "hex" : "text", "code")))))),
        { id: "records-table" }));
  };
  const form = h("form", { class: "inline", id: "browse-form" },
    field("Partition", partition), field("From", from), field("Offset / time", at),
    field("Records", limit), field("Show as", format), h("button", { class: "primary" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearMessages();
    load().catch(showError);
  });
  format.addEventListener("change", () => load().catch(showError));
  await load();
  return [h("h2", null, "Messages of ", h("a", { href: `#/topic/${enc(name)}` }, name)), form, out];
}

async function groupsPage() {
  const groups = await api("GET", "groups");
  return [
    h("h2", null, `Consumer groups (${groups.length})`),
    groups.length ? table(["Group", "State", "Protocol type"], groups.map((g) =>
      h("tr", { "data-group": g.group_id },
        h("td", null, h("a", { href: `#/group/${enc(g.group_id)}` }, g.group_id)),
        h("td", null, g.state), h("td", null, g.protocol_type || "–"))), { id: "groups" })
      : h("p", { class: "muted" }, "No consumer groups."),
  ];
}

async function groupPage(id) {
  const [group, clients] = await Promise.all([api("GET", `groups/${enc(id)}`), api("GET", "clients")]);
  // What a member's client pushed (KIP-714), found by its client id.
  const pushed = (clientId) => clients.filter((c) => c.client_id === clientId)
    .flatMap((c) => c.metrics);
  const metricsOf = (clientId) => {
    const metrics = pushed(clientId);
    if (!metrics.length) return h("td", { class: "muted" }, "–");
    return h("td", null, h("details", null, h("summary", null, `${metrics.length} metrics`),
      h("ul", { class: "client-metrics" }, metrics.map((m) => h("li", null,
        `${m.name}${Object.keys(m.labels).length ? ` {${Object.entries(m.labels).map(([k, v]) => `${k}=${v}`).join(", ")}}` : ""} = ${m.value}`)))));
  };
  const topics = [...new Set(group.partitions.map((p) => p.topic))];
  const topic = h("select", { name: "topic" }, h("option", { value: "" }, "all topics"),
    topics.map((t) => h("option", { value: t }, t)));
  const to = h("select", { name: "to" },
    ["earliest", "latest", "offset", "timestamp", "shift"].map((t) => h("option", { value: t }, t)));
  const value = h("input", { name: "value", placeholder: "offset, ms or date, or shift", size: 24 });
  const form = h("form", { class: "inline", id: "reset-offsets" },
    field("Topic", topic), field("Reset to", to), field("Value", value),
    h("button", { class: "danger" }, "Reset offsets"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearMessages();
    const body = { to: to.value };
    if (topic.value) body.topic = topic.value;
    try {
      if (to.value === "timestamp") body.value = parseTime(value.value);
      else if (to.value !== "earliest" && to.value !== "latest") body.value = Number(value.value);
      // The confirmation shows what would be committed: a dry run first.
      const plan = await api("POST", `groups/${enc(id)}/reset-offsets`, { ...body, dry_run: true });
      await act("Reset offsets", h("div", null,
        h("p", null, `Commit these offsets for group ${id}?`),
        table(["Topic", "Partition", "Committed", "New offset"], plan.offsets.map((o) =>
          h("tr", null, h("td", null, o.topic), num(o.partition), num(o.was), num(o.offset))))),
        () => api("POST", `groups/${enc(id)}/reset-offsets`, body),
        (r) => `Reset ${r.offsets.length} offset(s) of group ${id}.`);
    } catch (error) { showError(error); }
  });
  const totalLag = group.partitions.reduce((sum, p) => sum + (p.lag || 0), 0);
  return [
    h("h2", null, `Consumer group ${id}`),
    h("div", { class: "cards" }, card("State", group.state), card("Members", group.members.length),
      card("Protocol", [group.protocol_type, group.protocol].filter(Boolean).join("/") || "–"),
      card("Total lag", totalLag, totalLag ? "bad" : "ok")),
    h("h3", null, "Members"),
    group.members.length ? table(["Member", "Instance", "Client", "Host", "Assignment", "Client metrics"],
      group.members.map((m) => h("tr", null, h("td", null, m.member_id), h("td", null, m.group_instance_id || "–"),
        h("td", null, m.client_id), h("td", null, m.host),
        h("td", null, m.assignment.map(([t, p]) => `${t}-${p}`).join(", ") || "–"),
        metricsOf(m.client_id))), { id: "members" })
      : h("p", { class: "muted" }, "No active members."),
    h("h3", null, "Offsets"),
    table(["Topic", "Partition", "Committed", "End offset", "Lag", "Member"], group.partitions.map((p) =>
      h("tr", { "data-tp": `${p.topic}-${p.partition}` }, h("td", null, p.topic), num(p.partition),
        num(p.committed), num(p.end_offset), h("td", { class: p.lag ? "num bad" : "num" }, p.lag ?? "–"),
        h("td", null, p.member_id || "–"))), { id: "group-offsets" }),
    h("h3", null, "Reset offsets"),
    h("p", { class: "muted" }, "Only a group without active members can be reset."),
    form,
  ];
}

// Rates from samples of end offsets (produce) and committed offsets (consume), every 2 s.
async function livePage() {
  const history = { topics: new Map(), groups: new Map() };
  let previous = null;
  const out = h("div", { id: "live" }, h("p", { class: "muted" }, "Sampling…"));
  const sample = async () => {
    const now = await api("GET", "offsets");
    if (previous) {
      const seconds = Math.max((now.time_ms - previous.time_ms) / 1000, 0.001);
      for (const kind of ["topics", "groups"]) {
        for (const [name, total] of Object.entries(now[kind])) {
          const before = previous[kind][name];
          if (before == null) continue;
          const rates = history[kind].get(name) || [];
          rates.push(Math.max(total - before, 0) / seconds);
          history[kind].set(name, rates.slice(-30));
        }
      }
    }
    previous = now;
    out.replaceChildren(
      h("h3", null, "Produced (messages/s into each topic)"), rateTable("Topic", history.topics, "live-topics"),
      h("h3", null, "Consumed (committed messages/s of each group)"), rateTable("Group", history.groups, "live-groups"));
  };
  await sample();
  const timer = setInterval(() => sample().catch(showError), 2000);
  stopPage = () => clearInterval(timer);
  return [h("h2", null, "Live rates"), h("p", { class: "muted" }, "Sampled every 2 seconds."), out];
}

function rateTable(title, history, id) {
  const rows = [...history.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([name, rates]) =>
    h("tr", { "data-name": name }, h("td", null, name),
      h("td", { class: "num rate" }, rates[rates.length - 1].toFixed(1)), h("td", null, sparkline(rates))));
  return rows.length ? table([title, "msgs/s", "last minute"], rows, { id })
    : h("p", { class: "muted" }, "Waiting for a second sample…");
}

function sparkline(values) {
  const width = 120, height = 24, top = Math.max(...values, 1);
  const points = values.map((v, i) =>
    `${(i * width) / Math.max(values.length - 1, 1)},${height - (v / top) * (height - 2) - 1}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#2f5bd3");
  svg.append(line);
  return svg;
}

// Schemas of the registry the broker serving the console runs (schema.registry.listener).
async function schemasPage() {
  let registry;
  try {
    registry = await api("GET", "schemas");
  } catch (error) {
    if (error.status !== 404) throw error;
    return [h("h2", null, "Schemas"), h("p", { class: "muted", id: "no-registry" },
      "No schema registry is served beside this console: set schema.registry.listener on the broker, ",
      "or start odradek console with --schema-registry URL.")];
  }
  return [
    h("h2", null, `Schemas (${registry.subjects.length} subjects)`),
    h("div", { class: "cards" }, card("Compatibility", registry.compatibility, "compat-global"),
      card("Mode", registry.mode)),
    registry.subjects.length ? table(["Subject", "Versions", "Latest", "ID", "Type", "Compatibility"],
      registry.subjects.map((s) => h("tr", { "data-subject": s.subject },
        h("td", null, h("a", { href: `#/schema/${enc(s.subject)}` }, s.subject)),
        num(s.versions.length), num(s.latest), num(s.id), h("td", null, s.schema_type),
        h("td", null, s.compatibility))), { id: "subjects" })
      : h("p", { class: "muted" }, "No subjects registered."),
  ];
}

// A diff's lines, each coloured by what it is (added, removed, a hunk header).
function diffView(lines) {
  if (!lines.length) return h("p", { class: "muted", id: "schema-diff" }, "The two versions have the same text.");
  return h("pre", { class: "diff", id: "schema-diff" }, lines.map((line) => {
    const kind = line.startsWith("+++") || line.startsWith("---") ? "file"
      : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null;
    return h("span", kind ? { class: kind } : null, line + "\n");
  }));
}

async function schemaPage(name) {
  const subject = await api("GET", `schemas/${enc(name)}`);
  const numbers = subject.versions.map((v) => v.version);
  const latest = numbers[numbers.length - 1];
  const text = h("div", { id: "schema-text" });
  let rows = [];
  const showVersion = async (version) => {
    const found = await api("GET", `schemas/${enc(name)}/versions/${version}`);
    for (const row of rows) row.classList.toggle("selected", row.dataset.version === String(version));
    text.replaceChildren(h("h3", null, `Version ${found.version} (id ${found.id}, ${found.schema_type})`),
      h("pre", { class: "schema" }, found.schema));
  };
  const choose = (id, selected) => h("select", { id }, numbers.map((n) =>
    h("option", { value: n, selected: n === selected }, `version ${n}`)));
  const from = choose("diff-from", numbers.length > 1 ? numbers[numbers.length - 2] : latest);
  const to = choose("diff-to", latest);
  const diff = h("div", { id: "diff-out" });
  const compare = async () => {
    const answer = await api("GET", `schemas/${enc(name)}/diff?from=${from.value}&to=${to.value}`);
    diff.replaceChildren(diffView(answer.diff));
  };
  const form = h("form", { class: "inline", id: "schema-diff-form" },
    field("From", from), field("To", to), h("button", { class: "primary" }, "Compare"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearMessages();
    compare().catch(showError);
  });
  rows = subject.versions.map((v) => h("tr", { "data-version": v.version },
    num(v.version), num(v.id), h("td", null, v.schema_type),
    h("td", null, v.references.map((r) => `${r.name} → ${r.subject} v${r.version}`).join(", ") || "–"),
    h("td", null, h("button", { type: "button", onclick: () => showVersion(v.version).catch(showError) }, "Show"))));
  const view = [
    h("h2", null, `Subject ${name}`),
    h("div", { class: "cards" },
      card("Compatibility", subject.compatibility + (subject.subject_compatibility ? "" : " (global)"), "compat-subject"),
      card("Versions", numbers.length), card("Mode", subject.mode)),
    h("h3", null, "Versions"),
    table(["Version", "ID", "Type", "References", ""], rows, { id: "versions" }),
    text,
    h("h3", null, "Differences between versions"),
    form, diff,
  ];
  await Promise.all([showVersion(latest), compare()]);
  return view;
}

// -- routing ---------------------------------------------------------------------------------

const ROUTES = [
  [/^#?\/?$/, "brokers", brokersPage],
  [/^#\/topics$/, "topics", topicsPage],
  [/^#\/topic\/([^?]+)$/, "topics", (name) => topicPage(decodeURIComponent(name))],
  [/^#\/messages\/([^?]+)(\?.*)?$/, "topics", (name) => messagesPage(decodeURIComponent(name))],
  [/^#\/groups$/, "groups", groupsPage],
  [/^#\/group\/([^?]+)$/, "groups", (id) => groupPage(decodeURIComponent(id))],
  [/^#\/live$/, "live", livePage],
  [/^#\/schemas$/, "schemas", schemasPage],
  [/^#\/schema\/([^?]+)$/, "schemas", (name) => schemaPage(decodeURIComponent(name))],
];

async function route(clear = true) {
  stopPage();
  stopPage = () => {};
  if (clear && !keepMessages) clearMessages();
  if (clear) keepMessages = false;
  const hash = location.hash || "#/";
  const found = ROUTES.find(([pattern]) => pattern.test(hash));
  if (!found) {
    main.replaceChildren(h("p", null, `No page at ${hash}.`));
    return;
  }
  const [pattern, section, page] = found;
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("active", link.dataset.page === section);
  }
  const match = hash.match(pattern);
  main.setAttribute("aria-busy", "true");
  const started = performance.now();
  try {
    const content = await page(...match.slice(1));
    const made = performance.now();
    main.replaceChildren(...content);
    // How long the page took (read by benchmarks/console.py): asking the API and making the
    // elements, putting them in the document, and until the next paint.
    window.lastRoute = { hash, fetch_ms: made - started, draw_ms: performance.now() - made };
    requestAnimationFrame(() => setTimeout(() => {
      window.lastRoute.shown_ms = performance.now() - started; // after the next paint
    }));
  } catch (error) {
    main.replaceChildren(h("p", { class: "muted" }, "This page could not be loaded."));
    showError(error);
  } finally {
    main.removeAttribute("aria-busy");
  }
}

window.addEventListener("hashchange", () => route());
if (!ROUTES[0][0].test(location.hash)) {
  // The brokers page shows the bootstrap itself; any other first page asks for it.
  api("GET", "cluster").then((c) => {
    document.getElementById("bootstrap").textContent = c.bootstrap;
  }).catch(() => {});
}
route();
