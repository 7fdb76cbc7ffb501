// The operator page (an operator key): services, consumer lag, the backlogs `brainstream status`
// shows, the dead letters with their reasons, and the index generations (GET /v1/admin/status).
import {api, h, table} from "./api.js";

const card = (title, value, note) => h("div", {class: "card"}, title, h("b", {}, value),
                                       note ? h("span", {class: "muted"}, note) : "");

function queue(q) { return q && "count" in q ? q.count : "-"; }

export async function operatorPage(root) {
  const s = await api("GET", "/v1/admin/status");
  const letters = s.dead_letter_list || {letters: [], by_code: {}, truncated: false};
  root.append(
    h("h1", {}, "Operator ", h("span", {class: s.healthy ? "badge" : "badge warn", id: "health"},
                               s.healthy ? "healthy" : "unhealthy")),
    h("p", {class: "muted"}, `index generation ${s.index.generation}, graph ${s.index.graph},`
                             + ` consumer group ${s.index.consumer_group}`),
    h("h2", {}, "Services"),
    table(["service", "mode", "state", "address", "detail"],
          s.services.map(x => [x.name, x.mode, x.state, x.address, x.detail]), {id: "services"}),
    h("h2", {}, "Lag and backlogs"),
    h("div", {class: "cards", id: "backlogs"},
      card("consumer lag", s.lag.total ?? "-", s.lag.exact === false ? "at least" : ""),
      card("outbox", s.outbox.backlog ?? "-", s.outbox.failed ? `${s.outbox.failed} failed` : ""),
      card("embedding pending", s.embedding.pending ?? "-",
           s.embedding.failed ? `${s.embedding.failed} failed` : ""),
      card("extraction pending", s.extraction.pending ?? "-",
           s.extraction.failed ? `${s.extraction.failed} failed` : ""),
      card("deferred events", s.deferred.count ?? "-"),
      card("summaries pending", s.memory.summariser_pending ?? "-"),
      card("lexical queue", queue(s.lexical)),
      card("entity decisions", queue(s.decisions)),
      card("proposal queue", queue(s.proposals)),
      card("dead letters", s.dead_letters.count ?? "-")),
    s.lag.partitions ? table(["partition", "committed", "end", "lag"],
                             s.lag.partitions.map(p => [p.partition, p.committed, p.end, p.lag]),
                             {id: "lag"}) : "",
    Object.keys(s.celery_queues || {}).length
      ? table(["celery queue", "messages"], Object.entries(s.celery_queues)) : "",
    h("h2", {}, "Dead letters"),
    h("p", {class: "muted", id: "dead-letter-codes"},
      Object.entries(letters.by_code).map(([code, n]) => `${code}: ${n}`).join(", ") || "none",
      letters.truncated ? " (the first ones only)" : ""),
    table(["ref", "code", "message", "field", "event type", "namespace", "event id"],
          letters.letters.map(d => [d.ref, d.code, d.message, d.field, d.event_type,
                                    d.namespace, d.event_id]), {id: "dead-letters"}),
    h("h2", {}, "Generations"),
    table(["id", "state", "embedder", "dims", "graph", "created", "activated", "note"],
          (s.generations || []).map(g => [g.id, g.state, g.embedder, g.embedding_dim, g.graph,
                                          g.created_at, g.activated_at, g.note]),
          {id: "generations"}),
    Object.keys(s.errors).length
      ? [h("h2", {}, "Not collected"),
         table(["part", "error"], Object.entries(s.errors), {id: "status-errors"})] : "");
}
