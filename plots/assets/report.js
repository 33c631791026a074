// tracecast report: sortable and filterable tables, and the explorable GPU
// timeline (zoom, pan, hover, search). Plain script, no network, no library.
'use strict';

// Tables: click a header to sort (numbers numerically), type to filter rows.
document.querySelectorAll('table.sortable').forEach(table => {
  const body = table.tBodies[0];
  table.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => {
    const dir = th.dataset.d === 'a' ? 'd' : 'a';
    th.dataset.d = dir;
    const value = r => { const t = r.cells[i].dataset.v ?? r.cells[i].textContent, n = parseFloat(t); return isNaN(n) ? t : n; };
    [...body.rows].sort((x, y) => {
      const p = value(x), q = value(y);
      const c = typeof p === 'number' && typeof q === 'number' ? p - q : String(p).localeCompare(String(q));
      return dir === 'a' ? c : -c;
    }).forEach(r => body.appendChild(r));
  }));
  const filter = table.previousElementSibling;
  if (filter && filter.classList.contains('filter')) {
    filter.addEventListener('input', () => {
      const q = filter.value.toLowerCase();
      let shown = 0;
      [...body.rows].forEach(r => {
        const hit = !q || [...r.cells].some(c => (c.title || c.textContent).toLowerCase().includes(q));
        r.style.display = hit ? '' : 'none';
        shown += hit;
      });
      filter.dataset.shown = shown;
    });
  }
});

const SVG = 'http://www.w3.org/2000/svg';
const LANE = 26, TOP = 30, LEFT = 170, WIDTH = 1100, RIGHT = 20;

function fmt(us) {
  const a = Math.abs(us), trim = v => String(+v.toFixed(3));
  if (a >= 1e6) return trim(us / 1e6) + ' s';
  if (a >= 1e3) return trim(us / 1e3) + ' ms';
  return trim(us) + ' µs';
}

function work(flops, bytes) {
  const si = v => { const p = ['', 'k', 'M', 'G', 'T', 'P']; let i = 0; while (v >= 1000 && i < 5) { v /= 1000; i++; } return v.toFixed(2) + ' ' + p[i]; };
  const parts = [];
  if (flops != null) parts.push(si(flops) + 'FLOP');
  if (bytes != null) parts.push(si(bytes) + 'B');
  return parts.join(', ');
}

function timeline(root) {
  const data = JSON.parse(root.querySelector('script.tl-data').textContent);
  const svg = root.querySelector('svg.tl-svg');
  const search = root.querySelector('.tl-search');
  const hits = root.querySelector('.tl-hits');
  const S = data.strings;
  const byLane = data.lanes.map(() => []);
  data.kernels.forEach(k => byLane[k[0]].push(k));
  let end = 0;
  data.kernels.forEach(k => { end = Math.max(end, k[1] + k[2]); });
  const full = [0, end > 0 ? end : 1];
  let view = full.slice();
  let query = '';
  const plotW = WIDTH - LEFT - RIGHT;
  const x = t => LEFT + (t - view[0]) / (view[1] - view[0]) * plotW;
  const matches = k => query && (S[k[4]].toLowerCase().includes(query) || (k[5] >= 0 && S[k[5]].toLowerCase().includes(query)) || (k[6] >= 0 && S[k[6]].toLowerCase().includes(query)));
  const describe = (k, lane) => {
    const lines = [S[k[4]], lane, 'start ' + fmt(k[1]) + ', duration ' + fmt(k[2])];
    if (k[5] >= 0) lines.push('launched by ' + S[k[5]]);
    if (k[6] >= 0) lines.push('shapes ' + S[k[6]]);
    const w = work(k[7], k[8]);
    if (w) lines.push('work ' + w + (k[7] != null && k[2] > 0 ? ' (' + (k[7] / k[2] / 1e6).toFixed(1) + ' TFLOP/s)' : ''));
    return lines.join('\n');
  };
  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    for (const a in attrs) e.setAttribute(a, attrs[a]);
    parent.appendChild(e);
    return e;
  }
  function render() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    svg.dataset.v0 = view[0];
    svg.dataset.v1 = view[1];
    const res = (view[1] - view[0]) / plotW; // µs per pixel
    let drawn = 0, found = 0;
    // Time axis: about eight ticks at round numbers.
    const span = view[1] - view[0], step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    const tick = [1, 2, 5, 10].map(m => m * step).find(s => span / s <= 10);
    for (let t = Math.ceil(view[0] / tick) * tick; t <= view[1]; t += tick) {
      el('line', { x1: x(t), x2: x(t), y1: TOP - 6, y2: TOP + LANE * data.lanes.length, stroke: '#e6e6e6' }, svg);
      el('text', { x: x(t), y: TOP - 10, 'text-anchor': 'middle', 'font-size': 12, fill: '#555' }, svg).textContent = fmt(t);
    }
    data.lanes.forEach((label, li) => {
      const y = TOP + li * LANE;
      el('text', { x: LEFT - 8, y: y + LANE / 2 + 4, 'text-anchor': 'end', 'font-size': 12, fill: '#333' }, svg).textContent = label;
      const lane = byLane[li];
      // The first kernel that may be visible (kernels of a lane are sorted by start).
      let lo = 0, hi = lane.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (lane[m][1] + lane[m][2] < view[0] && lane[m][1] < view[0]) lo = m + 1; else hi = m; }
      let box = null;
      const flush = () => {
        if (!box) return;
        // A merged box shows the kind that took most of its time.
        const kind = box.time.indexOf(Math.max(...box.time));
        const r = el('rect', { x: x(box.s), y: y + 4, width: Math.max(1, x(box.e) - x(box.s)), height: LANE - 8, fill: box.hit ? '#111' : data.kinds[kind][1], class: box.hit ? 'k hit' : 'k' }, svg);
        el('title', {}, r).textContent = box.n === 1 ? describe(box.k, label) : box.n + ' kernels merged at this zoom (' + fmt(box.s) + ' – ' + fmt(box.e) + '): zoom in to see each';
        drawn++;
        box = null;
      };
      for (let i = lo; i < lane.length && lane[i][1] <= view[1]; i++) {
        const k = lane[i], s = Math.max(k[1], view[0]), e = Math.min(k[1] + k[2], view[1]), hit = !!matches(k);
        if (e < view[0]) continue;
        found += hit;
        // Merge what one pixel cannot tell apart; a match is never merged away.
        if (box && !hit && !box.hit && s - box.e < res && (e - s < res || box.e - box.s < res)) {
          box.e = Math.max(box.e, e); box.n++; box.time[k[3]] += e - s;
        } else {
          flush();
          box = { s, e, n: 1, k, hit, time: data.kinds.map(() => 0) };
          box.time[k[3]] = e - s;
        }
      }
      flush();
    });
    svg.dataset.drawn = drawn;
    hits.textContent = query ? found + ' matching kernel(s) in view' : '';
  }
  const pointer = e => {
    const r = svg.getBoundingClientRect();
    const px = (e.clientX - r.left) / Math.max(1, r.width) * WIDTH;
    return view[0] + (Math.min(Math.max(px, LEFT), WIDTH - RIGHT) - LEFT) / plotW * (view[1] - view[0]);
  };
  function zoom(at, factor) {
    const w = Math.min(full[1] - full[0], Math.max(1e-3, (view[1] - view[0]) * factor));
    let v0 = at - (at - view[0]) * w / (view[1] - view[0]);
    v0 = Math.min(Math.max(v0, full[0]), full[1] - w);
    view = [v0, v0 + w];
    render();
  }
  svg.addEventListener('wheel', e => { e.preventDefault(); zoom(pointer(e), e.deltaY < 0 ? 0.8 : 1.25); }, { passive: false });
  let drag = null;
  svg.addEventListener('mousedown', e => { drag = { x: e.clientX, v: view.slice() }; });
  window.addEventListener('mouseup', () => { drag = null; });
  window.addEventListener('mousemove', e => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    const dt = (e.clientX - drag.x) / Math.max(1, r.width) * WIDTH / plotW * (drag.v[1] - drag.v[0]);
    const w = drag.v[1] - drag.v[0];
    const v0 = Math.min(Math.max(drag.v[0] - dt, full[0]), full[1] - w);
    view = [v0, v0 + w];
    render();
  });
  search.addEventListener('input', () => { query = search.value.trim().toLowerCase(); render(); });
  root.querySelector('.tl-reset').addEventListener('click', () => { view = full.slice(); render(); });
  render();
  return { svg, search, data };
}

const timelines = [...document.querySelectorAll('div.timeline')].map(timeline);

// `report.html#selftest`: what the browser test checks, written into the DOM.
if (location.hash === '#selftest') {
  const out = { timelines: timelines.length };
  const t = timelines[0];
  if (t) {
    const before = [+t.svg.dataset.v0, +t.svg.dataset.v1];
    const r = t.svg.getBoundingClientRect();
    t.svg.dispatchEvent(new WheelEvent('wheel', { deltaY: -100, clientX: r.left + r.width / 2, clientY: r.top + 40, bubbles: true, cancelable: true }));
    out.before = before;
    out.after = [+t.svg.dataset.v0, +t.svg.dataset.v1];
    out.drawn = +t.svg.dataset.drawn;
    // Back to the whole step, then search for the name of the step's longest kernel.
    t.svg.closest('div.timeline').querySelector('.tl-reset').click();
    out.reset = [+t.svg.dataset.v0, +t.svg.dataset.v1];
    const longest = t.data.kernels.reduce((a, k) => (k[2] > a[2] ? k : a));
    t.search.value = t.data.strings[longest[4]];
    t.search.dispatchEvent(new Event('input'));
    out.query = t.search.value;
    out.highlighted = t.svg.querySelectorAll('rect.hit').length;
    document.body.prepend(t.svg.closest('figure')); // first on the page: docs/screenshot.sh's picture of it
  }
  out.charts = document.querySelectorAll('svg.chart').length;
  out.chartsWithTips = [...document.querySelectorAll('svg.chart')].filter(s => s.querySelector('g.tips title')).length;
  const replay = [...document.querySelectorAll('figure')].find(f => f.querySelector('figcaption').textContent.startsWith('Measured and replayed'));
  out.replayBars = replay ? [...replay.querySelectorAll('g.tips rect')].filter(r => +r.getAttribute('width') > 0 && +r.getAttribute('height') > 0).length : -1;
  out.negative = [...document.querySelectorAll('svg rect')].filter(r => +r.getAttribute('width') < 0 || +r.getAttribute('height') < 0).length;
  const pre = document.createElement('pre');
  pre.id = 'selftest-result'; // not the fragment's id: the browser would scroll to it
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}
