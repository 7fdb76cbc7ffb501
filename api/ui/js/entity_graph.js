// An entity's neighbourhood as a graph (cytoscape), drawn like graph.js draws objects: the
// entity and its strongest neighbours (GET /v1/entities/{id}), an edge per CO_OCCURS, RELATES
// or verified POSSIBLY_SAME edge; a click on a node adds its own neighbours.
import {api, h, errorBox} from "./api.js";
import {entityLink} from "./entity.js";
import {graphFrame} from "./graph_frame.js";

export async function entityGraphPage(root, [id]) {
  const start = await api("GET", `/v1/entities/${encodeURIComponent(id)}`);
  const frame = graphFrame(root, ["Neighbourhood of ", entityLink(start)],
                           "Click a node to add its neighbours.", ["#f0b45a", "#b06d12"],
                           {"width": "data(width)", "target-arrow-shape": "data(arrow)"});
  if (frame === null) return;
  const {cy, status, list} = frame;
  const expanded = new Set();

  function addNode(e) {
    const nodeId = e.entity_id || e.id;
    if (cy.getElementById(nodeId).nonempty()) return;
    cy.add({data: {id: nodeId, label: e.name, kind: e.label}});
    list.append(h("li", {"data-node": nodeId}, entityLink(e), h("span", {class: "badge"}, e.label)));
  }

  async function expand(nodeId) {
    if (expanded.has(nodeId)) return;
    expanded.add(nodeId);
    try {
      const e = nodeId === start.id ? start : await api("GET", `/v1/entities/${nodeId}`);
      for (const n of e.neighbours) {
        addNode(n);
        const [from, to] = n.direction === "in" ? [n.entity_id, nodeId] : [nodeId, n.entity_id];
        const edgeId = `${from}|${n.edge_type}|${n.predicate || ""}|${to}`;
        const reverse = `${to}|${n.edge_type}|${n.predicate || ""}|${from}`;
        if (cy.getElementById(edgeId).empty() && cy.getElementById(reverse).empty()) {
          cy.add({data: {id: edgeId, source: from, target: to,
                         label: n.predicate || n.edge_type.toLowerCase(),
                         width: Math.min(1 + n.weight, 6),
                         arrow: n.edge_type === "RELATES" ? "triangle" : "none"}});
        }
      }
      cy.getElementById(nodeId).addClass("expanded");
      status.textContent = `${cy.nodes().length} entities, ${cy.edges().length} edges`;
      cy.layout({name: "cose", animate: false, padding: 20}).run();
    } catch (err) {
      expanded.delete(nodeId);
      status.replaceChildren(errorBox(err));
    }
  }

  cy.on("tap", "node", (event) => expand(event.target.id()));
  addNode(start);
  await expand(start.id);
}
