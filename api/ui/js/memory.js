// A session's memory: the sessions of the namespace, and for one its latest summary and the
// recent messages (GET /v1/sessions/{id}/memory).
import {api, h, errorBox} from "./api.js";

export async function memoryPage(root, [sessionId]) {
  const input = h("input", {id: "session-id", class: "wide", placeholder: "session id",
                            value: sessionId || ""});
  const listing = await api("GET", "/v1/sessions?limit=50");
  const body = h("div", {id: "memory"});
  root.append(h("h1", {}, "Memory"),
              h("form", {class: "bar", onsubmit: (e) => {
                e.preventDefault();
                location.hash = `#/memory/${encodeURIComponent(input.value.trim())}`;
              }}, input, h("button", {type: "submit"}, "Open")),
              h("p", {class: "muted"}, "Sessions: ",
                listing.sessions.length ? "" : "none",
                listing.sessions.map(s => [h("a", {href: `#/memory/${encodeURIComponent(s.session_id)}`,
                                                   "data-session": s.session_id}, s.session_id),
                                           ` (${s.message_count}) `])),
              body);
  if (!sessionId) return;
  try {
    const memory = await api("GET", `/v1/sessions/${encodeURIComponent(sessionId)}/memory`);
    body.replaceChildren(
      h("h2", {}, `Session ${sessionId}`),
      h("h2", {}, "Summary"),
      memory.summary ? h("p", {id: "summary"}, memory.summary.content)
                     : h("p", {class: "muted"}, "No summary yet."),
      memory.summary_lag ? h("p", {class: "muted"}, `${memory.summary_lag} message(s) wait for the summariser`) : "",
      h("h2", {}, `Recent messages (${memory.messages.length})`),
      ...memory.messages.map(m => h("div", {class: "message " + m.role, "data-test": "message"},
                                    h("span", {class: "muted"}, `#${m.seq} ${m.role} · ${m.created_at}`),
                                    h("div", {}, m.content))));
  } catch (err) {
    body.replaceChildren(errorBox(err));
  }
}
