// One object: its properties, content, parts, the entities it names and its links (the
// neighbours one hop away through /v1/expand, without containment).
import {api, h, table, objectLink} from "./api.js";
import {entityLink} from "./entity.js";

export async function objectPage(root, [id]) {
  const [obj, parts, links] = await Promise.all([
    api("GET", `/v1/objects/${encodeURIComponent(id)}`),
    api("GET", `/v1/objects/${encodeURIComponent(id)}/children?limit=100`),
    api("POST", "/v1/expand", {object_id: id, max_hops: 1, direction: "both", limit: 50,
                               want_containment: false}),
  ]);
  root.append(
    h("h1", {id: "object-title"}, obj.title || obj.id, h("span", {class: "badge"}, obj.kind)),
    h("p", {class: "muted"}, `id ${obj.id} · updated ${obj.updated_at}`,
      obj.parent_id ? h("span", {}, " · part of ", objectLink({id: obj.parent_id})) : ""),
    h("p", {},
      h("a", {href: `#/graph/${obj.id}`, id: "open-graph"}, "Graph of its neighbourhood"), " · ",
      h("a", {href: `#/paths?from=${obj.id}`, id: "paths-from"}, "Paths from here")),
    obj.summary ? h("p", {}, obj.summary) : "",
    h("h2", {}, "Properties"),
    table(["property", "value"],
          Object.entries(obj.properties).map(([k, v]) => [k, JSON.stringify(v)]),
          {id: "properties"}),
    obj.content ? [h("h2", {}, "Content"), h("pre", {class: "content"}, obj.content)] : "",
    h("h2", {}, `Parts (${parts.objects.length})`),
    parts.objects.length
      ? table(["#", "part"], parts.objects.map(p => [p.position, (p.content || p.title || "").slice(0, 300)]),
              {id: "parts"})
      : h("p", {class: "muted"}, "No parts."),
    h("h2", {}, `Entities (${obj.entities.length}${obj.entities_truncated ? "+" : ""})`),
    obj.entities.length
      ? table(["entity", "label", "mentions"],
              obj.entities.map(e => [entityLink(e), e.label, e.mention_count]), {id: "entities"})
      : h("p", {class: "muted"}, "None extracted (yet)."),
    h("h2", {}, `Links (${links.objects.length})`),
    links.objects.length
      ? table(["direction", "relation", "object", "note"],
              links.objects.map(n => [n.relation && n.relation.direction === "in" ? "←" : "→",
                                      n.relation ? n.relation.type : "",
                                      objectLink(n), n.relation ? n.relation.note : ""]),
              {id: "links"})
      : h("p", {class: "muted"}, "No links."));
}
