// Building the page: elements, SVG, tables, times as people read them.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
export function s(tag, attrs) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

export function duration(seconds) {
  seconds = Math.max(0, Math.round(seconds));
  const hours = Math.floor(seconds / 3600), minutes = Math.floor((seconds % 3600) / 60);
  const secs = seconds % 60;
  if (hours) return `${hours}h${String(minutes).padStart(2, "0")}m`;
  return minutes ? `${minutes}m${String(secs).padStart(2, "0")}s` : `${secs}s`;
}

export function age(timestamp) {
  if (!timestamp) return "-";
  const seconds = Math.max(0, (Date.now() - Date.parse(timestamp)) / 1000);
  /** @type {[string, number][]} */
  const units = [["d", 86400], ["h", 3600], ["m", 60]];
  for (const [unit, size] of units) {
    if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
  }
  return `${Math.floor(seconds)}s`;
}

export function when(timestamp) {
  return timestamp ? new Date(timestamp).toLocaleString() : "-";
}

export function table(header, rows) {
  return h("table", {}, h("thead", {}, h("tr", {}, header.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((cell) => h("td", {}, cell ?? "-"))))));
}
