// The frame both graph pages draw in: a heading, a hint, a status line, the cytoscape canvas and
// the node list beside it. `nodeColours` are [node, expanded node]; `edgeStyle` adds to the
// shared edge style. Answers {cy, status, list}, or null when the graph library did not load.
import {h, errorBox} from "./api.js";

export function graphFrame(root, heading, hint, nodeColours, edgeStyle) {
  const status = h("p", {class: "muted", id: "graph-status"});
  const list = h("ul", {id: "graph-nodes"});
  const canvas = h("div", {id: "graph"});
  root.append(h("h1", {}, ...heading), h("p", {class: "muted"}, hint), status,
              h("div", {class: "graph-wrap"}, canvas, h("div", {class: "node-list"}, list)));
  if (typeof window.cytoscape !== "function") {
    root.append(errorBox("the graph library did not load (make install runs npm ci)"));
    return null;
  }
  const [node, expanded] = nodeColours;
  const cy = window.cytoscape({
    container: canvas,
    maxZoom: 1.5,  // a few nodes would otherwise fill the frame
    minZoom: 0.1,
    style: [
      {selector: "node", style: {"label": "data(label)", "font-size": 10, "background-color": node,
                                 "text-wrap": "ellipsis", "text-max-width": 120}},
      {selector: "node.expanded", style: {"background-color": expanded}},
      {selector: "edge", style: {"label": "data(label)", "font-size": 9, "curve-style": "bezier",
                                 "line-color": "#a8b3c7", "target-arrow-color": "#a8b3c7",
                                 ...edgeStyle}},
    ],
  });
  window.explorerGraph = cy;  // for the browser test and the console
  return {cy, status, list};
}
