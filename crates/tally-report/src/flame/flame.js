// tally flame: hover details, click to zoom, search, reset.
"use strict";
var svg, frames, details, matched, unzoomBtn, searchBtn;
var total, xpad, fontSize, fontWidth, eventName, avail;
var zoomed = null, searching = null;

function init(evt) {
	svg = document.documentElement;
	frames = document.getElementById("frames");
	details = document.getElementById("details").firstChild;
	matched = document.getElementById("matched");
	unzoomBtn = document.getElementById("unzoom");
	searchBtn = document.getElementById("search");
	total = Number(svg.getAttribute("data-total"));
	xpad = Number(svg.getAttribute("data-xpad"));
	fontSize = Number(svg.getAttribute("data-fontsize"));
	fontWidth = Number(svg.getAttribute("data-fontwidth"));
	eventName = svg.getAttribute("data-event");
	avail = Number(svg.getAttribute("width")) - 2 * xpad;
	frames.addEventListener("mouseover", function (e) {
		var g = frameOf(e.target);
		if (g) details.nodeValue = g.querySelector("title").textContent;
	});
	frames.addEventListener("mouseout", function () { details.nodeValue = " "; });
	frames.addEventListener("click", function (e) {
		var g = frameOf(e.target);
		if (g) zoom(g);
	});
	unzoomBtn.addEventListener("click", unzoom);
	searchBtn.addEventListener("click", searchPrompt);
	matched.addEventListener("click", resetSearch);
	window.addEventListener("keydown", function (e) {
		if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); searchPrompt(); }
		else if (e.key === "Escape") { resetSearch(); unzoom(); }
	});
	var params = new URLSearchParams(document.location.search);
	if (params.get("s")) search(params.get("s"));
	svg.setAttribute("data-ready", "1");
}

function frameOf(el) {
	while (el && el !== frames) {
		if (el.parentNode === frames) return el;
		el = el.parentNode;
	}
	return null;
}

function num(g, a) { return Number(g.getAttribute("data-" + a)); }

function fitText(g, width) {
	var t = g.querySelector("text");
	var name = g.getAttribute("data-n");
	var chars = Math.floor((width - 6) / (fontSize * fontWidth));
	if (chars < 3) t.textContent = "";
	else if (name.length <= chars) t.textContent = name;
	else t.textContent = name.substring(0, chars - 2) + "..";
}

function place(g, x, w) {
	var r = g.querySelector("rect"), t = g.querySelector("text");
	r.setAttribute("x", x.toFixed(2));
	r.setAttribute("width", w.toFixed(2));
	t.setAttribute("x", (x + 3).toFixed(2));
	fitText(g, w);
}

// Shows the frame `z` across the whole width with what is above it; its
// callers stay, faded, across the width; other frames hide.
function zoom(z) {
	var v = num(z, "v"), w = num(z, "w"), d = num(z, "d");
	var scale = avail / w;
	var all = frames.children;
	for (var i = 0; i < all.length; i++) {
		var g = all[i], gv = num(g, "v"), gw = num(g, "w"), gd = num(g, "d");
		g.classList.remove("hide", "parent");
		if (gd < d && gv <= v && gv + gw >= v + w) {
			g.classList.add("parent");
			place(g, xpad, avail);
		} else if (gd >= d && gv >= v && gv + gw <= v + w && gw > 0) {
			place(g, xpad + (gv - v) * scale, gw * scale);
		} else {
			g.classList.add("hide");
		}
	}
	zoomed = z;
	unzoomBtn.classList.remove("hide");
	if (searching) search(searching);
}

function unzoom() {
	var scale = avail / total;
	var all = frames.children;
	for (var i = 0; i < all.length; i++) {
		var g = all[i];
		g.classList.remove("hide", "parent");
		place(g, xpad + num(g, "v") * scale, num(g, "w") * scale);
	}
	zoomed = null;
	unzoomBtn.classList.add("hide");
	if (searching) search(searching);
}

function searchPrompt() {
	var term = prompt("Search for (a regular expression, e.g. ^alloc):", searching || "");
	if (term) search(term);
}

// Highlights the frames whose name matches and says how many matched and
// what share of the total (nested matches counted once).
function search(term) {
	var re;
	try { re = new RegExp(term); } catch (e) { matched.textContent = "Bad expression"; return; }
	resetSearch();
	searching = term;
	var all = frames.children, ranges = [], count = 0;
	for (var i = 0; i < all.length; i++) {
		var g = all[i], r = g.querySelector("rect");
		if (!re.test(g.getAttribute("data-n"))) continue;
		count++;
		g.setAttribute("data-fill", r.getAttribute("fill"));
		r.setAttribute("fill", "rgb(230,0,230)");
		ranges.push([num(g, "v"), num(g, "v") + num(g, "w")]);
	}
	ranges.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
	var sum = 0, end = -1;
	for (var j = 0; j < ranges.length; j++) {
		var s = Math.max(ranges[j][0], end), e = ranges[j][1];
		if (e > s) { sum += e - s; end = e; }
	}
	var share = total > 0 ? (100 * sum / total).toFixed(2) : "0.00";
	matched.textContent = "Matched: " + count + " frame" + (count === 1 ? "" : "s") + ", " + share + "%";
	matched.setAttribute("data-count", String(count));
	searchBtn.classList.add("show");
}

function resetSearch() {
	var all = frames.children;
	for (var i = 0; i < all.length; i++) {
		var g = all[i];
		if (g.hasAttribute("data-fill")) {
			g.querySelector("rect").setAttribute("fill", g.getAttribute("data-fill"));
			g.removeAttribute("data-fill");
		}
	}
	searching = null;
	matched.textContent = " ";
	matched.removeAttribute("data-count");
	searchBtn.classList.remove("show");
}
