// Shows the details of the matrix cell the fragment names, marks the cell
// selected. Without script, :target in the stylesheet does the same.
(function () {
  "use strict";
  var placeholder = document.getElementById("placeholder");
  var current = null;

  function show(id, scroll) {
    var art = id ? document.getElementById(id) : null;
    if (!art || !art.classList.contains("detail")) {
      return false;
    }
    if (current && current !== art) {
      current.hidden = true;
    }
    var prev = document.querySelectorAll("td.cell.selected");
    for (var i = 0; i < prev.length; i++) {
      prev[i].classList.remove("selected");
      prev[i].removeAttribute("aria-current");
    }
    art.hidden = false;
    placeholder.hidden = true;
    current = art;
    var td = document.querySelector('td.cell[data-id="' + id + '"]');
    if (td) {
      td.classList.add("selected");
      td.setAttribute("aria-current", "true");
    }
    if (scroll) {
      art.scrollIntoView({ block: "start" });
    }
    return true;
  }

  function fromHash(scroll) {
    var id = "";
    try {
      id = decodeURIComponent(window.location.hash.slice(1));
    } catch (e) {
      return;
    }
    show(id, scroll);
  }

  var table = document.querySelector("table.matrix");
  if (table) {
    // Unhide before the browser follows the link, so it scrolls to it.
    table.addEventListener("click", function (ev) {
      var a = ev.target.closest ? ev.target.closest("td.cell a") : null;
      if (a) {
        show(a.getAttribute("href").slice(1), false);
      }
    });
  }
  window.addEventListener("hashchange", function () { fromHash(false); });
  fromHash(true);
})();
