// pimail webmail: live folder updates, keyboard shortcuts, address
// suggestions. Plain JavaScript; the pages work without it.
(function () {
  "use strict";
  var body = document.body;

  // Mobile folder menu.
  var toggle = document.getElementById("menu-toggle");
  if (toggle) toggle.addEventListener("click", function () { body.classList.toggle("show-folders"); });

  // Confirmation for destructive buttons.
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("[data-confirm]");
    if (b && !window.confirm(b.getAttribute("data-confirm"))) e.preventDefault();
  });

  // Rows open their message on click (not on checkboxes or links).
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#msgs tr.msg")); }
  document.addEventListener("click", function (e) {
    var tr = e.target.closest && e.target.closest("#msgs tr.msg");
    if (!tr || e.target.closest("a,input,button,label")) return;
    window.location.href = tr.getAttribute("data-href");
  });

  // Live updates: one event stream per page, fed by the store's change feed.
  var refreshing = false, again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var nf = doc.getElementById("folders"), of = document.getElementById("folders");
        if (nf && of) of.replaceWith(nf);
        var nl = doc.getElementById("msgs"), ol = document.getElementById("msgs");
        if (nl && ol && !document.querySelector("#msgs input:checked")) {
          var cur = current();
          ol.replaceWith(nl);
          if (cur >= 0) select(cur);
        }
      })
      .catch(function () {})
      .then(function () { refreshing = false; if (again) { again = false; refresh(); } });
  }
  if (window.EventSource && document.getElementById("folders")) {
    var es = new EventSource("/events");
    es.addEventListener("change", function () { refresh(); });
    es.addEventListener("logout", function () { es.close(); window.location.href = "/login"; });
    window.addEventListener("pagehide", function () { es.close(); });
  }

  // Keyboard shortcuts: j/k move, enter opens, r reply, a reply all,
  // f forward, c compose, # delete, / search.
  function current() { var rs = rows(); for (var i = 0; i < rs.length; i++) if (rs[i].classList.contains("current")) return i; return -1; }
  function select(i) {
    var rs = rows();
    if (!rs.length) return;
    i = Math.max(0, Math.min(rs.length - 1, i));
    rs.forEach(function (r) { r.classList.remove("current"); });
    rs[i].classList.add("current");
    rs[i].scrollIntoView({ block: "nearest" });
  }
  function click(id) { var el = document.getElementById(id); if (el) { el.click(); return true; } return false; }
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT" || e.target.isContentEditable) return;
    var rs = rows();
    switch (e.key) {
      case "j": select(current() + 1); break;
      case "k": select(current() < 0 ? 0 : current() - 1); break;
      case "Enter": if (current() >= 0) window.location.href = rs[current()].getAttribute("data-href"); else return; break;
      case "c": window.location.href = "/compose"; break;
      case "r": if (!click("reply")) return; break;
      case "a": if (!click("reply-all")) return; break;
      case "f": if (!click("forward")) return; break;
      case "/": var q = document.getElementById("q"); if (q) q.focus(); break;
      case "#":
        if (document.getElementById("message")) { click("delete-btn"); break; }
        var i = current();
        if (i < 0) return;
        var cb = rs[i].querySelector("input[type=checkbox]");
        if (cb) { cb.checked = true; click("delete-btn"); }
        break;
      default: return;
    }
    e.preventDefault();
  });

  // Address suggestions from the user's correspondents.
  var timer = null, list = null, active = -1;
  function closeList() { if (list) { list.remove(); list = null; } active = -1; }
  function lastToken(v) { var i = v.lastIndexOf(","); return { head: i < 0 ? "" : v.slice(0, i + 1) + " ", tok: v.slice(i + 1).trim() }; }
  function choose(input, value) {
    var p = lastToken(input.value);
    input.value = p.head + value + ", ";
    closeList();
    input.focus();
  }
  function show(input, items) {
    closeList();
    if (!items.length) return;
    list = document.createElement("ul");
    list.className = "suggest";
    list.setAttribute("role", "listbox");
    items.forEach(function (s) {
      var li = document.createElement("li");
      li.textContent = s;
      li.setAttribute("role", "option");
      li.addEventListener("mousedown", function (e) { e.preventDefault(); choose(input, s); });
      list.appendChild(li);
    });
    var r = input.getBoundingClientRect();
    list.style.left = (r.left + window.scrollX) + "px";
    list.style.top = (r.bottom + window.scrollY) + "px";
    list.style.minWidth = r.width / 2 + "px";
    document.body.appendChild(list);
  }
  Array.prototype.forEach.call(document.querySelectorAll("input.addr"), function (input) {
    input.addEventListener("input", function () {
      clearTimeout(timer);
      var tok = lastToken(input.value).tok;
      if (tok.length < 2) { closeList(); return; }
      timer = setTimeout(function () {
        fetch("/suggest?q=" + encodeURIComponent(tok), { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
          .then(function (r) { return r.ok ? r.json() : []; })
          .then(function (items) { show(input, items); })
          .catch(function () {});
      }, 150);
    });
    input.addEventListener("keydown", function (e) {
      if (!list) return;
      var lis = list.querySelectorAll("li");
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        active = (active + (e.key === "ArrowDown" ? 1 : lis.length - 1)) % lis.length;
        Array.prototype.forEach.call(lis, function (li, i) { li.classList.toggle("on", i === active); });
        e.preventDefault();
      } else if (e.key === "Enter" && active >= 0) {
        choose(input, lis[active].textContent);
        e.preventDefault();
      } else if (e.key === "Escape") {
        closeList();
      }
    });
    input.addEventListener("blur", function () { setTimeout(closeList, 100); });
  });
})();
