// The EDITH console: a client of the control plane's own API (`/v1`), in the browser.
// No build step and no dependencies: the server embeds these files as they are. The API key
// is kept in sessionStorage, so it lasts as long as the browser tab's session.

const KEY = "edith.apiKey";
const view = document.getElementById("view");
const trail = document.getElementById("trail");
const status = document.getElementById("status");
const signOut = document.getElementById("sign-out");

// Streams of the view on screen, stopped when the view changes.
let leaving = new AbortController();

/** An element: `h("a", {href: "#"}, "text", child)`. Text is always text, never markup. */
function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else if (value !== false && value != null) element.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child != null) element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

function say(text) {
  status.textContent = text;
}

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.code = problem.code;
  }
}

function authorization(key = sessionStorage.getItem(KEY) || "") {
  return { Authorization: `Bearer ${key}` };
}

/** The JSON of a reply; a reply that is not JSON (a proxy's error page) says its status. */
async function readJson(response) {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : {};
  } catch {
    return { detail: `HTTP ${response.status} (not a reply of the control plane)` };
  }
}

/** A refused key ends the sign-in: the next view asks for one again. */
function refused(response) {
  if (response.status === 401) {
    sessionStorage.removeItem(KEY);
    setTimeout(route);
  }
}

/** Calls the API; the reply's JSON, or an ApiError with the problem's detail. */
async function api(method, path, body) {
  const headers = authorization();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const reply = await readJson(response);
  if (!response.ok) {
    refused(response);
    throw new ApiError(response.status, reply);
  }
  return reply;
}

const FINAL = new Set(["turn.finished", "job.finished"]);

/**
 * Follows a turn's or a job's event stream (SSE over fetch, which, unlike EventSource, can
 * send the key), calling `onEvent` with each event until the final one. A dropped stream is
 * resumed after the last event seen (`?after=`), a few times; the view changing stops it.
 */
async function follow(path, onEvent) {
  let after = 0;
  for (let attempt = 0; attempt < 5; attempt++) {
    if (attempt) await new Promise((resume) => setTimeout(resume, 1000 * attempt));
    let response;
    try {
      response = await fetch(`${path}?after=${after}`, { headers: authorization(), signal: leaving.signal });
    } catch (error) {
      if (error.name === "AbortError") return;
      continue; // the server is out of reach for now
    }
    if (!response.ok) {
      refused(response);
      throw new ApiError(response.status, await readJson(response));
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trimStart())
            .join("\n");
          if (!data) continue;
          const event = JSON.parse(data);
          after = event.seq;
          onEvent(event);
          if (FINAL.has(event.type)) return;
        }
      }
    } catch (error) {
      if (error.name === "AbortError") return;
    }
  }
  throw new Error("the event stream keeps dropping; reload the page to follow it again");
}

function stateBadge(state) {
  return h("span", { class: `state state-${state}` }, state);
}

const SETTLING = new Set(["provisioning", "deleting"]);

/** Runs `refresh` again every second while it says something is still settling. */
function whileSettling(refresh) {
  const signal = leaving.signal;
  const again = async () => {
    if (signal.aborted) return;
    if (await refresh().catch(() => false)) setTimeout(again, 1000);
  };
  setTimeout(again, 1000);
}

function errorLine(error) {
  return h("p", { class: "error", role: "alert" }, error.message);
}

/** A one-line form of labelled fields and a submit button; `onsubmit` gets the values. Each
 * field `[name, label]` is a text field, `[name, label, choices]` a
 * choice among `[value, text]` pairs (the first chosen at first). */
function inlineForm(fields, submit, onsubmit) {
  const inputs = fields.map(([name, , choices]) =>
    choices
      ? h("select", { name, id: `field-${name}` }, choices.map(([value, text]) => h("option", { value }, text)))
      : h("input", { name, id: `field-${name}`, required: true }),
  );
  const form = h(
    "form",
    { class: "inline" },
    fields.map(([name, label], i) => h("label", { for: `field-${name}` }, label, inputs[i])),
    h("button", { type: "submit" }, submit),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values = Object.fromEntries(inputs.map((input) => [input.name, input.value.trim()]));
    form.querySelector("button").disabled = true;
    try {
      await onsubmit(values);
      form.reset();
    } catch (error) {
      form.after(errorLine(error));
    } finally {
      form.querySelector("button").disabled = false;
    }
  });
  return form;
}

// The trail of the page being built: shown with its content, never before it (a trail that
// already named the next page above the last one's form would invite typing into a form about
// to go).
let nextTrail = [];

function setTrail(...links) {
  nextTrail = links;
}

function show(title, ...content) {
  trail.replaceChildren(...nextTrail.flatMap((link, i) => (i ? [" / ", link] : [link])));
  view.replaceChildren(h("h1", {}, title), ...content);
  view.focus();
}

// ---- views ----------------------------------------------------------------------------------

function signIn() {
  signOut.hidden = true;
  setTrail();
  const key = h("input", { id: "api-key", type: "password", autocomplete: "off", required: true });
  const form = h(
    "form",
    { class: "inline" },
    h("label", { for: "api-key" }, "API key", key),
    h("button", { type: "submit" }, "Sign in"),
  );
  const problem = h("div", {});
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const candidate = key.value.trim();
    const response = await fetch("/v1/instances?limit=1", { headers: authorization(candidate) });
    if (!response.ok) {
      problem.replaceChildren(errorLine(new ApiError(response.status, await readJson(response))));
      key.focus();
      return;
    }
    sessionStorage.setItem(KEY, candidate);
    // Where the tab was going (a bookmark, a link), or the instances.
    if (location.hash.startsWith("#/instances")) route();
    else location.hash = "#/instances";
  });
  show(
    "Sign in",
    h("p", {}, "Sign in with an API key of this control plane. It is kept for this browser tab only."),
    form,
    problem,
  );
  key.focus();
}

async function instances() {
  setTrail(h("a", { href: "#/instances" }, "Instances"));
  const progress = h("section", { "aria-label": "Provisioning" });
  const table = h("table", {});
  const refresh = async () => {
    const page = await api("GET", "/v1/instances?limit=200");
    const settling = page.items.some((instance) => SETTLING.has(instance.state));
    table.replaceChildren(
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Provider"), h("th", {}, "State"))),
      h(
        "tbody",
        {},
        page.items.map((instance) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: `#/instances/${instance.id}` }, instance.name)),
            h("td", {}, instance.provider),
            h("td", {}, stateBadge(instance.state)),
          ),
        ),
      ),
    );
    return settling;
  };
  // Runtimes the operator configured; the embedded one needs none.
  const runtimes = await api("GET", "/v1/runtimes").catch(() => []);
  const choices = [["", "embedded"], ...runtimes.map((runtime) => [runtime.name, `process: ${runtime.name}`])];
  const fields = [["name", "Name"], ["runtime", "Runtime", choices]];
  const create = inlineForm(fields, "Create instance", async ({ name, runtime }) => {
    const body = runtime ? { name, provider: "process", runtime } : { name };
    const created = await api("POST", "/v1/instances", body);
    await refresh();
    await followJob(progress, created.job, created.instance.name);
    await refresh();
  });
  show("Instances", create, progress, table);
  // Instances others create or delete settle here too.
  if (await refresh()) whileSettling(refresh);
}

const JOB_NAMES = { "instance.provision": "Provisioning", "instance.delete": "Deleting" };

/** Shows `job`'s steps in `into` as they run, and how it ended; returns when it has. */
async function followJob(into, job, name) {
  const steps = h("ol", { class: "steps" });
  const outcome = h("p", {});
  into.replaceChildren(h("h2", {}, `${JOB_NAMES[job.kind] || job.kind} ${name}`), steps, outcome);
  await follow(`/v1/jobs/${job.id}/events`, (event) => {
    if (event.type === "step.started") {
      steps.append(h("li", { id: `step-${event.step}` }, `${event.step} … `, stateBadge("running")));
    } else if (event.type === "step.completed") {
      document.getElementById(`step-${event.step}`)?.replaceChildren(`${event.step} `, stateBadge("done"));
    } else if (event.type === "job.finished") {
      outcome.replaceChildren(`${name} is `, stateBadge(event.instance_state), event.error ? ` — ${event.error}` : "");
    }
  });
}

/** Tools by name: `ids` (a profile's tools) as the names models see, from the tool list. */
async function toolNames(ids) {
  if (!ids.length) return "none";
  const tools = await api("GET", "/v1/tools?limit=200");
  const names = new Map(tools.items.map((tool) => [tool.id, tool.name]));
  return ids.map((id) => names.get(id) || id).join(", ");
}

async function instance(iid) {
  const found = await api("GET", `/v1/instances/${iid}`);
  setTrail(h("a", { href: "#/instances" }, "Instances"), h("a", { href: `#/instances/${iid}` }, found.name));
  const table = h("table", {});
  const refresh = async () => {
    const page = await api("GET", `/v1/instances/${iid}/profiles?limit=200`);
    const tools = await Promise.all(page.items.map((profile) => toolNames(profile.tools)));
    table.replaceChildren(
      h("thead", {}, h("tr", {}, h("th", {}, "Profile"), h("th", {}, "Model"), h("th", {}, "Tools"))),
      h(
        "tbody",
        {},
        page.items.map((profile) =>
          h(
            "tr",
            {},
            h("td", {}, h("a", { href: `#/instances/${iid}/profiles/${profile.id}` }, profile.name)),
            h("td", {}, profile.model.provider),
            h("td", {}, tools[page.items.indexOf(profile)]),
          ),
        ),
      ),
    );
  };
  const create = inlineForm([["name", "Profile name"]], "Create profile", async ({ name }) => {
    await api("POST", `/v1/instances/${iid}/profiles`, { name });
    await refresh();
  });
  const state = h("span", {}, stateBadge(found.state));
  const progress = h("section", { "aria-label": "Job" });
  show(found.name, h("p", {}, "State: ", state), progress, h("h2", {}, "Profiles"), create, table);
  await refresh();
  if (SETTLING.has(found.state)) {
    // Whoever started it (another tab, the CLI, an application), its job's steps show here.
    const jobs = await api("GET", `/v1/instances/${iid}/jobs`).catch(() => []);
    const running = jobs.filter((job) => job.state === "queued" || job.state === "running").pop();
    if (running) {
      await followJob(progress, running, found.name).catch((error) => progress.append(errorLine(error)));
      const now = await api("GET", `/v1/instances/${iid}`).catch(() => null);
      if (now) state.replaceChildren(stateBadge(now.state));
    }
    whileSettling(async () => {
      const now = await api("GET", `/v1/instances/${iid}`);
      state.replaceChildren(stateBadge(now.state));
      return SETTLING.has(now.state);
    });
  }
}

async function profile(iid, pid) {
  const [found, owner] = await Promise.all([
    api("GET", `/v1/instances/${iid}/profiles/${pid}`),
    api("GET", `/v1/instances/${iid}`),
  ]);
  const base = `/v1/instances/${iid}/profiles/${pid}`;
  setTrail(
    h("a", { href: "#/instances" }, "Instances"),
    h("a", { href: `#/instances/${iid}` }, owner.name),
    h("a", { href: `#/instances/${iid}/profiles/${pid}` }, found.name),
  );
  const list = h("ul", {});
  const page = await api("GET", `${base}/sessions?limit=200`);
  list.replaceChildren(
    ...page.items.map((session) =>
      h(
        "li",
        {},
        h("a", { href: `#/instances/${iid}/profiles/${pid}/sessions/${session.id}` }, session.title || session.id),
      ),
    ),
  );
  const start = h("button", { type: "button" }, "New session");
  start.addEventListener("click", async () => {
    try {
      const session = await api("POST", `${base}/sessions`, {});
      location.hash = `#/instances/${iid}/profiles/${pid}/sessions/${session.id}`;
    } catch (error) {
      start.after(errorLine(error));
    }
  });
  show(
    found.name,
    h("p", {}, `Model: ${found.model.provider}. Tools: ${await toolNames(found.tools)}.`),
    h("h2", {}, "Sessions"),
    start,
    list,
  );
}

async function session(iid, pid, sid) {
  const base = `/v1/instances/${iid}/profiles/${pid}/sessions/${sid}`;
  const [owner, found] = await Promise.all([
    api("GET", `/v1/instances/${iid}`),
    api("GET", `/v1/instances/${iid}/profiles/${pid}`),
  ]);
  setTrail(
    h("a", { href: "#/instances" }, "Instances"),
    h("a", { href: `#/instances/${iid}` }, owner.name),
    h("a", { href: `#/instances/${iid}/profiles/${pid}` }, found.name),
    h("span", {}, "Session"),
  );
  const conversation = h("div", { class: "conversation", "aria-live": "polite" });
  const earlier = await api("GET", `${base}/turns?limit=200`);
  let unfinished = null;
  for (const turn of earlier.items) {
    conversation.append(h("div", { class: "message user" }, turn.input));
    if (!ENDED.has(turn.state)) {
      unfinished = turn; // followed below: its questions can still be answered
      continue;
    }
    if (turn.output) conversation.append(h("div", { class: "message assistant" }, turn.output));
    conversation.append(turnEnd(turn.state, turn.error), eventLog(`${base}/turns/${turn.id}`));
  }
  const input = h("textarea", { id: "message", rows: 3, cols: 60, required: true });
  const send = h("button", { type: "submit" }, "Send");
  const cancel = h("button", { type: "button", class: "danger", hidden: true }, "Cancel turn");
  const form = h("form", { class: "inline" }, h("label", { for: "message" }, "Message", input), send, cancel);
  const raw = h("pre", { class: "events", id: "raw-events" });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    send.disabled = true;
    try {
      const turn = await api("POST", `${base}/turns`, { input: text });
      input.value = "";
      conversation.append(h("div", { class: "message user" }, text));
      await runTurn(`${base}/turns/${turn.id}`, conversation, raw, cancel);
    } catch (error) {
      conversation.append(errorLine(error));
    } finally {
      send.disabled = false;
      cancel.hidden = true;
    }
  });
  show(
    "Session",
    h("p", {}, `Session ${sid}`),
    conversation,
    form,
    h("details", {}, h("summary", {}, "Raw events of the turn followed last"), raw),
  );
  input.focus();
  if (unfinished) {
    send.disabled = true;
    try {
      await runTurn(`${base}/turns/${unfinished.id}`, conversation, raw, cancel);
    } catch (error) {
      conversation.append(errorLine(error));
    } finally {
      send.disabled = false;
      cancel.hidden = true;
    }
  }
}

const ENDED = new Set(["completed", "failed", "cancelled", "interrupted"]);

function turnEnd(state, error) {
  return h("p", { class: "turn-end" }, "Turn ", stateBadge(state), error ? ` — ${error}` : "");
}

/** A finished turn's events, fetched when someone opens them. */
function eventLog(path) {
  const log = h("pre", { class: "events" });
  const details = h("details", {}, h("summary", {}, "Events"), log);
  details.addEventListener("toggle", () => {
    if (!details.open || log.textContent) return;
    follow(`${path}/events`, (event) => (log.textContent += `${JSON.stringify(event)}\n`)).catch(
      (error) => details.append(errorLine(error)),
    );
  });
  return details;
}

/** Streams one turn into the conversation: text as it arrives, tool calls, and questions. */
async function runTurn(path, conversation, raw, cancel) {
  raw.textContent = "";
  let answer = null;
  cancel.hidden = false;
  cancel.onclick = async () => {
    cancel.disabled = true;
    await api("POST", `${path}/cancel`).catch((error) => conversation.append(errorLine(error)));
    cancel.disabled = false;
  };
  const act = async (action, ask) => {
    const controls = ask.querySelectorAll("button, input");
    controls.forEach((control) => (control.disabled = true));
    try {
      await api("POST", `${path}/actions`, action);
      ask.append(h("p", {}, "Answered."));
    } catch (error) {
      ask.append(errorLine(error));
      controls.forEach((control) => (control.disabled = false)); // so it can be tried again
    }
  };
  await follow(`${path}/events`, (event) => {
    raw.textContent += `${JSON.stringify(event)}\n`;
    switch (event.type) {
      case "message.started":
        answer = null; // made with its first text, so it stands after what came before
        break;
      case "message.delta":
        if (!answer) conversation.append((answer = h("div", { class: "message assistant" })));
        answer.append(event.text);
        break;
      case "tool.started":
        answer = null; // text after a tool call is a message of its own, below the call
        conversation.append(h("div", { class: "tool" }, `calling ${event.name} …`));
        break;
      case "tool.completed":
        conversation.append(h("div", { class: "tool" }, `${event.name} returned ${JSON.stringify(event.result)}`));
        break;
      case "approval.requested": {
        const ask = h("div", { class: "ask", role: "group", "aria-label": "Approval" });
        ask.append(
          h("p", {}, `Approve running: ${event.command}`),
          h("p", {}, event.description),
          h(
            "div",
            { class: "choices" },
            event.choices.map((choice) =>
              h(
                "button",
                { type: "button", class: choice === "deny" ? "danger" : "", onclick: () => act({ type: "approval", choice }, ask) },
                choice === "deny" ? "Deny" : `Approve (${choice})`,
              ),
            ),
          ),
        );
        conversation.append(ask);
        break;
      }
      case "clarify.requested": {
        const ask = h("div", { class: "ask", role: "group", "aria-label": "Question" });
        const respond = (text) => act({ type: "clarify", request_id: event.request_id, answer: text }, ask);
        const reply = h("input", { id: `answer-${event.request_id}`, required: true });
        const answerForm = h(
          "form",
          { class: "inline" },
          h("label", { for: `answer-${event.request_id}` }, "Answer", reply),
          h("button", { type: "submit" }, "Answer"),
        );
        answerForm.addEventListener("submit", (submitted) => {
          submitted.preventDefault();
          respond(reply.value.trim());
        });
        const choices = event.choices.map((choice) =>
          h("button", { type: "button", onclick: () => respond(choice) }, choice),
        );
        ask.append(h("p", {}, event.question), h("div", { class: "choices" }, choices), answerForm);
        conversation.append(ask);
        break;
      }
      case "turn.finished":
        conversation.append(turnEnd(event.state, event.error));
        break;
    }
  });
}

// ---- routing --------------------------------------------------------------------------------

async function route() {
  leaving.abort();
  leaving = new AbortController();
  say("");
  if (!sessionStorage.getItem(KEY)) return signIn();
  signOut.hidden = false;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  try {
    if (parts[0] !== "instances" || parts.length === 1) return await instances();
    if (parts.length === 2) return await instance(parts[1]);
    if (parts.length === 4) return await profile(parts[1], parts[3]);
    if (parts.length === 6) return await session(parts[1], parts[3], parts[5]);
    return await instances();
  } catch (error) {
    setTrail(h("a", { href: "#/instances" }, "Instances"));
    show("Something went wrong", errorLine(error));
  }
}

signOut.addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  route();
});
window.addEventListener("hashchange", route);
route();
