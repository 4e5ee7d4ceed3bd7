// pimail webmail: the reading pane, live folder updates, keyboard
// shortcuts, selection, drag and drop onto folders, address suggestions.
// Plain JavaScript; every page works without it.
(function () {
  "use strict";
  var body = document.body;
  body.classList.add("js");
  var csrf = (document.querySelector("meta[name=csrf]") || {}).content || "";
  function $(id) { return document.getElementById(id); }
  function each(sel, fn, root) { Array.prototype.forEach.call((root || document).querySelectorAll(sel), fn); }
  function phone() { return window.matchMedia("(max-width: 720px)").matches; }
  function get(url) {
    return fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { return new DOMParser().parseFromString(html, "text/html"); });
  }

  // Phone folder menu.
  var toggle = $("menu-toggle");
  if (toggle) toggle.addEventListener("click", function () { body.classList.toggle("show-folders"); });

  // Confirmation for destructive buttons.
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("[data-confirm]");
    if (b && !window.confirm(b.getAttribute("data-confirm"))) e.preventDefault();
  });

  // The list's order applies as soon as it is chosen.
  var view = $("viewform");
  if (view) view.addEventListener("change", function () { view.submit(); });

  // Rows.
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#msgs tr.msg")); }
  function rowLink(tr) { var a = tr.querySelector(".subj a"); return a ? a.getAttribute("href") : tr.getAttribute("data-href"); }
  var pane = $("pane");
  function paneMode() { return pane && !phone(); }

  // The reading pane: the message page's article, fetched and put beside
  // the list; the address bar names the list with the message open.
  var paneTimer = null;
  function openRow(tr) {
    var href = tr.getAttribute("data-href");
    if (!paneMode() || href.indexOf("/msg/") !== 0) { window.location.href = rowLink(tr); return; }
    get(href).then(function (doc) {
      var art = doc.getElementById("message");
      if (!art) return;
      var here = rowLink(tr);
      each("input[name=next]", function (i) { i.value = here; }, art);
      pane.replaceChildren(art);
      $("listview").classList.add("has-msg");
      rows().forEach(function (r) { r.classList.toggle("open", r === tr); });
      tr.classList.remove("unread");
      history.replaceState(null, "", here);
      document.title = doc.title;
    }).catch(function () { window.location.href = rowLink(tr); });
  }
  document.addEventListener("click", function (e) {
    var tr = e.target.closest && e.target.closest("#msgs tr.msg");
    if (!tr || e.target.closest("input,button,label") || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    select(rows().indexOf(tr), true);
    openRow(tr);
  });

  // Selection: a box for the whole page; when it is full, the choice of
  // every message of the folder, on all pages.
  var selPage = $("select-page"), allPages = $("allpages"), allBox = $("all-pages");
  function boxes() { return Array.prototype.slice.call(document.querySelectorAll("#msgs input[name=uid]")); }
  function syncSelection() {
    var bs = boxes(), on = bs.filter(function (b) { return b.checked; }).length;
    if (selPage) { selPage.checked = bs.length > 0 && on === bs.length; selPage.indeterminate = on > 0 && on < bs.length; }
    if (allPages) {
      var full = bs.length > 0 && on === bs.length;
      allPages.classList.toggle("show", full);
      if (!full && allBox) allBox.checked = false;
    }
  }
  if (selPage) selPage.addEventListener("change", function () {
    boxes().forEach(function (b) { b.checked = selPage.checked; });
    syncSelection();
  });
  document.addEventListener("change", function (e) { if (e.target.matches && e.target.matches("#msgs input[name=uid]")) syncSelection(); });

  // Live updates: one event stream per page, fed by the store's change feed.
  var refreshing = false, again = false;
  function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    get(window.location.href).then(function (doc) {
      var nf = doc.getElementById("folders"), of = $("folders");
      if (nf && of) { of.replaceWith(nf); dropTargets(); }
      var nl = doc.getElementById("msgs"), ol = $("msgs");
      if (nl && ol && !document.querySelector("#msgs input:checked")) {
        var cur = current(), open = document.querySelector("#msgs tr.open");
        var openUID = open && open.getAttribute("data-uid");
        ol.replaceWith(nl);
        if (cur >= 0) select(cur);
        if (openUID) rows().forEach(function (r) { if (r.getAttribute("data-uid") === openUID) r.classList.add("open"); });
        syncSelection();
      }
    }).catch(function () {})
      .then(function () { refreshing = false; if (again) { again = false; refresh(); } });
  }
  if (window.EventSource && $("folders")) {
    var es = new EventSource("/events");
    es.addEventListener("change", function () { refresh(); });
    es.addEventListener("logout", function () { es.close(); window.location.href = "/login"; });
    window.addEventListener("pagehide", function () { es.close(); });
  }

  // Drag and drop: rows onto a folder move them (with Ctrl or Alt held,
  // copy them).
  var dragged = null;
  document.addEventListener("dragstart", function (e) {
    var tr = e.target.closest && e.target.closest("#msgs tr.msg");
    if (!tr) return;
    var cb = tr.querySelector("input[name=uid]");
    var sel = cb && cb.checked ? rows().filter(function (r) { var c = r.querySelector("input[name=uid]"); return c && c.checked; }) : [tr];
    dragged = { box: tr.getAttribute("data-box"), uids: sel.map(function (r) { return r.getAttribute("data-uid"); }), rows: sel };
    sel.forEach(function (r) { r.classList.add("dragging"); });
    e.dataTransfer.effectAllowed = "copyMove";
    e.dataTransfer.setData("text/plain", sel.length + " message(s)");
  });
  document.addEventListener("dragend", function () {
    if (dragged) dragged.rows.forEach(function (r) { r.classList.remove("dragging"); });
    dragged = null;
  });
  function dropTargets() {
    each("#folders a[data-box]", function (a) {
      a.addEventListener("dragover", function (e) {
        if (!dragged || a.getAttribute("data-box") === dragged.box) return;
        e.preventDefault();
        e.dataTransfer.dropEffect = e.ctrlKey || e.altKey ? "copy" : "move";
        a.classList.add("drop");
      });
      a.addEventListener("dragleave", function () { a.classList.remove("drop"); });
      a.addEventListener("drop", function (e) {
        e.preventDefault();
        a.classList.remove("drop");
        if (!dragged) return;
        var f = new URLSearchParams();
        f.set("csrf", csrf); f.set("box", dragged.box); f.set("target", a.getAttribute("data-box"));
        f.set("op", e.ctrlKey || e.altKey ? "copy" : "move");
        dragged.uids.forEach(function (u) { f.append("uid", u); });
        fetch("/act", { method: "POST", credentials: "same-origin", body: f, headers: { "X-Requested-With": "fetch" } })
          .then(function () { refresh(); });
      });
    });
  }
  dropTargets();

  // Keyboard shortcuts: j/k move (and show the message in the pane),
  // enter opens, r reply, a reply all, f forward, c compose, # delete,
  // / search.
  function current() { var rs = rows(); for (var i = 0; i < rs.length; i++) if (rs[i].classList.contains("current")) return i; return -1; }
  function select(i, quiet) {
    var rs = rows();
    if (!rs.length || i < 0) return;
    i = Math.max(0, Math.min(rs.length - 1, i));
    rs.forEach(function (r) { r.classList.remove("current"); });
    rs[i].classList.add("current");
    rs[i].scrollIntoView({ block: "nearest" });
    if (!quiet && paneMode()) {
      clearTimeout(paneTimer);
      paneTimer = setTimeout(function () { openRow(rs[i]); }, 200);
    }
  }
  function click(id) { var el = $(id); if (el) { el.click(); return true; } return false; }
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target.tagName;
    if (t === "INPUT" || t === "TEXTAREA" || t === "SELECT" || e.target.isContentEditable) return;
    var rs = rows();
    switch (e.key) {
      case "j": select(current() + 1); break;
      case "k": select(current() < 0 ? 0 : current() - 1); break;
      case "Enter": if (current() < 0) return; clearTimeout(paneTimer); openRow(rs[current()]); break;
      case "c": window.location.href = "/compose"; break;
      case "r": if (!click("reply")) return; break;
      case "a": if (!click("reply-all")) return; break;
      case "f": if (!click("forward")) return; break;
      case "/": var q = $("q"); if (q) q.focus(); break;
      case "#":
        if (document.querySelector("#pane #message") || !$("msgs")) { if (!click("delete-btn")) return; break; }
        var i = current();
        if (i < 0) return;
        var cb = rs[i].querySelector("input[type=checkbox]");
        if (cb) { cb.checked = true; click("delete-btn"); }
        break;
      default: return;
    }
    e.preventDefault();
  });

  // Compose: the formatting editor (a contenteditable element; the server
  // keeps only formatting from what it posts) and the From menu, which
  // swaps the signature.
  var form = $("compose-form"), editor = $("editor"), text = $("body");
  if (form && editor && text) {
    var toggleBox = $("format-toggle"), bar = $("editbar");
    $("format-label").hidden = false;
    var html = false;
    function setMode(on) {
      html = on;
      editor.hidden = !on; bar.hidden = !on; text.hidden = on;
      if (toggleBox) toggleBox.checked = on;
    }
    function textToEditor() {
      editor.replaceChildren();
      text.value.split("\n").forEach(function (line) {
        var d = document.createElement("div");
        if (line) d.textContent = line; else d.appendChild(document.createElement("br"));
        editor.appendChild(d);
      });
    }
    setMode(editor.getAttribute("data-html") === "1");
    toggleBox.addEventListener("change", function () {
      if (toggleBox.checked) { textToEditor(); setMode(true); editor.focus(); return; }
      text.value = editor.innerText;
      setMode(false);
    });
    each("#editbar button", function (btn) {
      btn.addEventListener("mousedown", function (e) { e.preventDefault(); });
      btn.addEventListener("click", function () {
        var cmd = btn.getAttribute("data-cmd"), arg = btn.getAttribute("data-arg");
        if (cmd === "createLink") {
          arg = window.prompt("Link to (https://…)", "https://");
          if (!arg || !/^(https?:|mailto:)/i.test(arg)) return;
        }
        document.execCommand(cmd, false, arg);
        editor.focus();
      });
    });
    // Pasted text comes in as text: formatting is made here, not copied.
    editor.addEventListener("paste", function (e) {
      e.preventDefault();
      document.execCommand("insertText", false, (e.clipboardData || window.clipboardData).getData("text/plain"));
    });
    form.addEventListener("submit", function () {
      if (html) { $("format").value = "html"; $("html").value = editor.innerHTML; text.value = editor.innerText; }
      else $("format").value = "plain";
    });
    var from = $("from");
    if (from) {
      var sig = from.selectedOptions[0].getAttribute("data-signature");
      from.addEventListener("change", function () {
        var next = from.selectedOptions[0].getAttribute("data-signature");
        if (html) {
          // The signature is the text of the editor's last block after "-- ".
          var txt = editor.innerText;
          if (sig && txt.indexOf(sig) >= 0) { text.value = txt.replace(sig, next); textToEditor(); }
        } else if (sig && text.value.indexOf(sig) >= 0) {
          text.value = text.value.replace(sig, next);
        } else if (!sig && next) {
          text.value = text.value.replace(/\s*$/, "\n\n" + next);
        }
        sig = next;
      });
    }
  }

  // Address suggestions from the address book and correspondents.
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
      li.textContent = s.label;
      li.setAttribute("role", "option");
      li.addEventListener("mousedown", function (e) { e.preventDefault(); choose(input, s.value); });
      li._value = s.value;
      list.appendChild(li);
    });
    var r = input.getBoundingClientRect();
    list.style.left = (r.left + window.scrollX) + "px";
    list.style.top = (r.bottom + window.scrollY) + "px";
    list.style.minWidth = r.width / 2 + "px";
    body.appendChild(list);
  }
  each("input.addr", function (input) {
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
        choose(input, lis[active]._value);
        e.preventDefault();
      } else if (e.key === "Escape") {
        closeList();
      }
    });
    input.addEventListener("blur", function () { setTimeout(closeList, 100); });
  });
})();
