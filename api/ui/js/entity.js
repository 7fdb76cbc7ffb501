// Entities: a search box over their names (POST /v1/entities/search), and one entity's page:
// name, labels, aliases, counts, its strongest neighbours and its mentions a page at a time
// (each linking to its object), with a link to its neighbourhood in the graph view.
import {api, h, table, objectLink, render} from "./api.js";

export function entityLink(e) {
  const id = e.entity_id || e.id;
  return h("a", {href: `#/entity/${id}`, "data-test": "entity-link", "data-id": id}, e.name);
}

export async function entitiesPage(root, _path, params) {
  const input = h("input", {id: "entity-query", type: "search", placeholder: "a name",
                            value: params.get("q") || ""});
  const results = h("div", {id: "entity-results"});
  const form = h("form", {id: "entity-search", onsubmit: (event) => {
    event.preventDefault();
    location.hash = `#/entities?q=${encodeURIComponent(input.value.trim())}`;
  }}, input, h("button", {type: "submit"}, "Find entities"));
  root.append(h("h1", {}, "Entities"), form, results);
  const query = (params.get("q") || "").trim();
  if (!query) return;
  await render(results, async () => {
    const found = await api("POST", "/v1/entities/search", {query, limit: 20});
    if (!found.entities.length) return h("p", {class: "muted"}, "No entity has a name like that.");
    return table(["entity", "label", "parts", "method", "confidence"],
                 found.entities.map(e => [entityLink(e), e.label, e.part_count, e.method,
                                          e.confidence.toFixed(2)]),
                 {id: "entity-hits"});
  });
}

function mentionRow(m) {
  const s = m.snippet;
  const snippet = h("span", {class: "snippet"}, s.text.slice(0, s.start),
                    h("mark", {}, s.text.slice(s.start, s.end)), s.text.slice(s.end));
  return h("tr", {"data-row": m.row_id},
           h("td", {}, objectLink({id: m.object_id, title: m.title})),
           h("td", {}, m.field), h("td", {}, snippet));
}

export async function entityPage(root, [id]) {
  const e = await api("GET", `/v1/entities/${encodeURIComponent(id)}`);
  const rows = h("tbody", {});
  const more = h("button", {id: "more-mentions", hidden: true}, "More mentions");
  let cursor = null;
  async function page() {
    const q = new URLSearchParams({limit: "20"});
    if (cursor) q.set("cursor", cursor);
    const got = await api("GET", `/v1/entities/${e.id}/mentions?${q}`);
    rows.append(...got.mentions.map(mentionRow));
    cursor = got.cursor;
    more.hidden = !cursor;
  }
  more.addEventListener("click", () => page());
  root.append(
    h("h1", {id: "entity-name"}, e.name, h("span", {class: "badge"}, e.label)),
    e.note ? h("p", {class: "muted", id: "entity-note"}, e.note) : "",
    h("p", {class: "muted", id: "entity-counts"},
      `${e.mention_count} mentions in ${e.object_count} objects · id ${e.id}`),
    h("p", {}, h("a", {href: `#/entity-graph/${e.id}`, id: "entity-graph-link"},
                 "Graph of its neighbourhood")),
    h("h2", {}, "Labels"),
    table(["label", "mentions"], e.labels.map(l => [l.label, l.count]), {id: "entity-labels"}),
    h("h2", {}, `Aliases (${e.aliases.length})`),
    e.aliases.length
      ? h("ul", {id: "entity-aliases"}, e.aliases.map(a => h("li", {}, a.alias, " ",
                                                             h("span", {class: "muted"}, a.source))))
      : h("p", {class: "muted"}, "No aliases."),
    h("h2", {}, `Neighbours (${e.neighbours.length})`),
    e.neighbours.length
      ? table(["entity", "label", "edge", "weight"],
              e.neighbours.map(n => [entityLink(n), n.label,
                                     n.predicate ? `${n.edge_type} ${n.direction === "in" ? "←" : "→"} ${n.predicate}`
                                                 : n.edge_type, n.weight]),
              {id: "entity-neighbours"})
      : h("p", {class: "muted"}, "No neighbours."),
    h("h2", {}, "Mentions"),
    h("table", {id: "entity-mentions"},
      h("thead", {}, h("tr", {}, ["object", "field", "where"].map(c => h("th", {}, c)))), rows),
    more);
  await page();
}
