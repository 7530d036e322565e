// The leaderboard site's behaviour: sortable columns and filters by kind. No dependencies and
// no requests: it works from file:// as from any static host.
"use strict";

// A cell's sort key: its data-value (numbers) or its text; "" sorts last either way.
function sortKey(row, column) {
  const cell = row.cells[column];
  if (cell === undefined) return "";
  return cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
}

function compareKeys(a, b, numeric) {
  if (a === "" || b === "") return (a === "") - (b === "");
  return numeric ? Number(a) - Number(b) : a.localeCompare(b);
}

// Sort the table of a clicked column header: ascending first, then descending; empty cells last.
function sortByHeader(header) {
  const table = header.closest("table");
  const column = Array.prototype.indexOf.call(header.parentNode.children, header);
  const ascending = header.getAttribute("aria-sort") !== "ascending";
  const numeric = header.dataset.type === "number";
  for (const other of header.parentNode.children) other.removeAttribute("aria-sort");
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort(function (r, s) {
    const a = sortKey(r, column);
    const b = sortKey(s, column);
    if (a === "" || b === "") return compareKeys(a, b, numeric);
    return (ascending ? 1 : -1) * compareKeys(a, b, numeric);
  });
  for (const row of rows) body.appendChild(row);
}

// Show only the rows whose kind is ticked in the filters.
function applyFilters() {
  const shown = new Set();
  for (const box of document.querySelectorAll("#filters input[type=checkbox]")) {
    if (box.checked) shown.add(box.value);
  }
  for (const row of document.querySelectorAll("table.leaderboard tbody tr")) {
    row.hidden = !shown.has(row.dataset.kind);
  }
}

document.addEventListener("DOMContentLoaded", function () {
  for (const header of document.querySelectorAll("table.leaderboard thead th")) {
    header.querySelector("button").addEventListener("click", function () {
      sortByHeader(header);
    });
  }
  for (const box of document.querySelectorAll("#filters input[type=checkbox]")) {
    box.addEventListener("change", applyFilters);
  }
  applyFilters();
});
