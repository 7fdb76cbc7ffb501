// The neighbourhood of an object as a graph (cytoscape): a click on a node expands it through
// /v1/expand (one hop, both directions, links and containment); the list beside the drawing
// does the same with a button, and opens each node's object page.
import {api, h, errorBox, objectLink} from "./api.js";
import {graphFrame} from "./graph_frame.js";

export async function graphPage(root, [id]) {
  const start = await api("GET", `/v1/objects/${encodeURIComponent(id)}`);
  const frame = graphFrame(root, ["Graph around ", objectLink(start)], "Click a node to expand it.",
                           ["#6ea8fe", "#2b4a86"],
                           {"target-arrow-shape": "triangle", "width": 1.5});
  if (frame === null) return;
  const {cy, status, list} = frame;
  const expanded = new Set();

  function addNode(obj) {
    if (cy.getElementById(obj.id).nonempty()) return;
    cy.add({data: {id: obj.id, label: obj.title || obj.id.slice(0, 8), kind: obj.kind}});
    const button = h("button", {"data-expand": obj.id, onclick: () => expand(obj.id)}, "expand");
    list.append(h("li", {"data-node": obj.id}, objectLink(obj),
                  h("span", {class: "badge"}, obj.kind), " ", button));
  }

  async function expand(nodeId) {
    if (expanded.has(nodeId)) return;
    expanded.add(nodeId);
    status.textContent = "expanding...";
    try {
      const page = await api("POST", "/v1/expand", {object_id: nodeId, max_hops: 1,
                                                    direction: "both", limit: 50});
      for (const n of page.objects) {
        addNode(n);
        const rel = n.relation || {type: "related", direction: "out"};
        const [from, to] = rel.direction === "in" ? [n.id, nodeId] : [nodeId, n.id];
        const edgeId = `${from}|${rel.type}|${to}`;
        if (cy.getElementById(edgeId).empty()) {
          cy.add({data: {id: edgeId, source: from, target: to, label: rel.type}});
        }
      }
      cy.getElementById(nodeId).addClass("expanded");
      const button = list.querySelector(`[data-expand="${nodeId}"]`);
      if (button) button.replaceWith(h("span", {class: "muted"}, "expanded"));
      status.textContent = `${cy.nodes().length} nodes, ${cy.edges().length} edges`;
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
