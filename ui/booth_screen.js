// The booth's visitor screen (ui/booth.py mounts it; issue 30). It runs here, in the visitor's browser: a photo is
// posted to the booth's HTTP route (web/booth_api.py) and its answer drawn here, as are the photo and what the model
// saw, the heat map (posted again on demand), the attract view, "Start over" and the idle reset. None of it costs
// the server a script run. The photo lives in this page only, and is dropped on "Start over" and on idle.
// Every word shown comes from Python (data.texts); anything from a visitor or the model is set as text, never HTML.
//
// The "Teach" tab (issue 44): the visitor names 2–10 things and shows it 3–30 photos of each (POST /_booth/teach,
// one photo a request), taps "Learn" (POST /_booth/learn: a new last layer on the frozen model's features, its loss
// curve drawn here point by point), then classifies as before, a taught name marked "taught just now". The server
// keeps the features and the head under this tab's random visitor id (header X-Booth-Visitor), never a photo;
// "Forget" and the idle reset drop them (POST /_booth/forget) and draw a new id.

// Plain line icons drawn for the booth (Debian's chromium has no emoji font: issue 18), inside a 24×24 box
const SVG = {
  camera: '<rect x="2.5" y="6.5" width="19" height="14" rx="2"/><path d="M8 6.5 9.5 3.5h5L16 6.5"/><circle cx="12" cy="13.5" r="4"/>',
  upload: '<path d="M12 16V4M6.5 9.5 12 4l5.5 5.5M4 15v5h16v-5"/>',
  restart: '<path d="M5 12a7 7 0 1 0 2.1-5M5 3v4.5h4.5"/>',
  learn: '<path d="M3 19h18M5 15l4-5 4 3 6-8"/>',
  forget: '<path d="M4 7h16M9 7V4h6v3M6 7l1 13h10l1-13"/>',
  fire: '<path d="M12 21c-3.9 0-6.5-2.6-6.5-6.2 0-3.6 3-5.6 3.9-9.3 2.2 1.4 3.1 3.4 3.1 5.2 1-.6 1.6-1.8 1.7-3 2.1 1.6 3.3 4.2 3.3 7.1 0 3.6-2.6 6.2-5.5 6.2z"/>',
};

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

function icon(name) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", "booth-icon");
  svg.innerHTML = SVG[name]; // the constants above: no visitor's text ever reaches innerHTML
  return svg;
}

const percent = (p) => `${Math.round(p * 100)}%`;
// "an African crocodile", "a tabby": the article a label's first letter asks for (English labels, vowel sound by letter)
const article = (label) => (/^[aeiou]/i.test(label) ? "an" : "a");

function bars(top, mark) {
  // `mark` is the words beside a name this visitor taught ("taught just now")
  return h("div", { class: "booth-bars" }, ...top.map((p) => {
    const fill = h("div", { class: "booth-fill" });
    fill.style.width = `${(p.prob * 100).toFixed(1)}%`;
    const label = h("span", { class: "booth-label" }, p.label);
    if (p.taught) label.append(" ", h("small", { class: "booth-taught" }, mark));
    return h("div", { class: p.taught ? "booth-row booth-row-taught" : "booth-row" }, label,
      h("div", { class: "booth-track" }, fill), h("span", { class: "booth-pct" }, percent(p.prob)));
  }));
}

// A visitor's id for what they teach (X-Booth-Visitor): 32 of the 64 characters [A-Za-z0-9_-], each from one random
// byte's low 6 bits (256 is a multiple of 64: every character equally likely). New at "Forget" and the idle reset.
const ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

function newVisitorId() {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => ID_CHARS[b & 63]).join("");
}

const NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  return node;
}

function xsrfHeaders() {
  const cookie = document.cookie.split("; ").find((c) => c.startsWith("_streamlit_xsrf="));
  return cookie ? { "X-Xsrftoken": cookie.slice("_streamlit_xsrf=".length) } : {};
}

export default function (component) {
  const { data, parentElement } = component;
  if (parentElement.querySelector(".booth-screen")) return undefined; // drawn once per page; the browser keeps it
  const d = data;
  const t = d.texts;
  const k = d.teach; // the Teach tab's rules: names, photos per name, a name's length

  // ------------------------------------------------------------------ the page's parts
  // One file input and one video for the whole screen, moved into the tab shown (the Upload or Teach tab's drop
  // zone, the Camera or Teach tab's preview): one camera stream, and `input[type=file]` is always the one input.
  const file = h("input", { type: "file", class: "booth-file", accept: d.accept, "aria-label": "Upload a photo" });
  const video = h("video", { class: "booth-video", playsinline: "", muted: "", autoplay: "" });
  video.hidden = true;
  const cameraNote = h("p", { class: "booth-note booth-camera-note" });
  const shoot = h("button", { type: "button", class: "booth-button booth-shoot" }, icon("camera"), "Take a picture");
  const tab = (name, label) => h("button", { type: "button", role: "tab", class: "booth-tab", "data-tab": name },
    icon(name), label);
  const tabs = { camera: tab("camera", "Camera"), upload: tab("upload", "Upload"), teach: tab("learn", "Teach") };
  tabs.teach.setAttribute("data-tab", "teach");
  const uploadDrop = h("label", { class: "booth-drop" }, icon("upload"),
    h("span", {}, "Drop a photo here, or tap to choose one"),
    h("small", {}, `JPG, PNG, WEBP, BMP or GIF, up to ${d.max_mb} MB`), file);

  // The Teach tab: a name, its photos (camera or files), the names so far, "Learn" and "Forget"
  const nameInput = h("input", { type: "text", class: "booth-name", maxlength: String(k.name_chars),
    autocomplete: "off", spellcheck: "false", placeholder: t.teach_placeholder, "aria-label": "Name" });
  const teachCam = h("div", { class: "booth-teach-cam" });
  const teachShoot = h("button", { type: "button", class: "booth-button booth-shoot" }, icon("camera"),
    "Take a photo of it");
  const teachDrop = h("label", { class: "booth-drop booth-drop-small" }, icon("upload"),
    h("span", {}, `Or add photos of it (${k.min_photos} to ${k.max_photos})`));
  const teachError = h("p", { class: "booth-error", role: "alert" });
  teachError.hidden = true;
  const teachStatus = h("p", { class: "booth-note booth-teach-status", role: "status" });
  const nameList = h("ul", { class: "booth-names", "aria-label": "Names taught" });
  const learnButton = h("button", { type: "button", class: "booth-button booth-shoot booth-learn" }, icon("learn"),
    "Learn");
  const learnHint = h("p", { class: "booth-note booth-learn-hint" });
  const forgetButton = h("button", { type: "button", class: "booth-button booth-forget" }, icon("forget"), "Forget");
  forgetButton.hidden = true;

  const panels = {
    camera: h("div", { class: "booth-panel", role: "tabpanel", "data-panel": "camera" }, video, shoot, cameraNote),
    upload: h("div", { class: "booth-panel", role: "tabpanel", "data-panel": "upload" }, uploadDrop),
    teach: h("div", { class: "booth-panel booth-teach", role: "tabpanel", "data-panel": "teach" },
      h("p", { class: "booth-teach-intro" }, t.teach_intro),
      h("label", { class: "booth-name-label" }, h("span", {}, "1 · Name it"), nameInput),
      h("div", { class: "booth-name-label" }, h("span", {}, "2 · Show it photos of it")), teachCam, teachShoot,
      teachDrop, teachError, teachStatus, nameList, learnButton, learnHint, forgetButton,
      h("p", { class: "booth-note booth-teach-privacy" }, t.teach_privacy)),
  };
  const restart = h("button", { type: "button", class: "booth-button booth-restart" }, icon("restart"), "Start over");
  const after = h("div", { class: "booth-after" }, restart, h("p", { class: "booth-caption" }, t.idle));
  after.hidden = true;
  const controls = h("div", { class: "booth-controls" },
    h("div", { class: "booth-tabs", role: "tablist" }, tabs.camera, tabs.upload, tabs.teach),
    panels.camera, panels.upload, panels.teach, after);

  const error = h("div", { class: "booth-error", role: "alert" });
  error.hidden = true;
  const attract = h("div", { class: "booth-attract" });
  const busy = h("p", { class: "booth-busy", role: "status" }, "Looking at your photo…");
  busy.hidden = true;
  const answer = h("div", { class: "booth-answer" });
  const lesson = h("div", { class: "booth-lesson" }); // the loss curve and what was learned
  const how = h("div", { class: "booth-how" });
  const stage = h("div", { class: "booth-stage" }, error, busy, answer, lesson, attract, how);
  const root = h("div", { class: "booth-screen" }, controls, stage);
  parentElement.append(root);

  // ------------------------------------------------------------------ the visitor's state (this page's memory only)
  let visit = 0; // bumped by every new photo and every reset: a late answer for an older visit is dropped
  let current = null; // {body, name, bitmap, urls: [], top}
  let inflight = null; // the AbortController of the request under way
  let idleTimer = null;
  let attractTimer = null;
  let shownSample = -1;
  let stream = null;
  let fileFor = "classify"; // what the file input's next photos are for: "classify" or "teach"
  // What this visitor taught: its id, the names (their photo counts and a few thumbnails), what "Learn" answered
  let visitor = newVisitorId();
  let lessonNo = 0; // bumped at every forget: a late teach answer for an older lesson is dropped (and forgotten)
  let taught = { names: new Map(), sent: false, learned: null, stale: false, pending: 0, learning: false };

  function forget() {
    visit += 1;
    if (inflight) inflight.abort();
    inflight = null;
    if (current) {
      for (const url of current.urls) URL.revokeObjectURL(url);
      if (current.bitmap && current.bitmap.close) current.bitmap.close();
    }
    current = null;
    file.value = "";
  }

  function startOver() { // the answer goes; what was taught stays (the visitor may show it another photo)
    forget();
    clearTimeout(idleTimer);
    idleTimer = null;
    answer.replaceChildren();
    how.replaceChildren();
    error.hidden = true;
    busy.hidden = true;
    after.hidden = true;
    showAttract();
    tap();
  }

  function reset() { // the idle reset: the answer and everything taught
    forgetTaught();
    startOver();
  }

  function active() { return Boolean(current || taught.sent || nameInput.value); }

  function tap() { // the idle reset comes idle_s after the last tap while a photo is shown or something was taught
    clearTimeout(idleTimer);
    idleTimer = active() ? setTimeout(reset, d.idle_s * 1000) : null;
  }

  function fail(message) {
    error.replaceChildren(message);
    error.hidden = false;
  }

  const reached = (e) => (e instanceof TypeError ? "The booth could not be reached; please try again." : e.message);

  // ------------------------------------------------------------------ the attract view (every screen shows the same)
  function showAttract() {
    attract.hidden = Boolean(lesson.firstChild); // the lesson's curve takes its place
    shownSample = -1;
    drawAttract();
  }

  function drawAttract() {
    clearTimeout(attractTimer);
    if (attract.hidden || !d.attract.length) return;
    const period = d.attract_period_s * 1000;
    const index = Math.floor(Date.now() / period) % d.attract.length;
    if (index !== shownSample) {
      const item = d.attract[index];
      attract.replaceChildren(
        h("figure", {}, h("img", { src: item.src, alt: item.title }), h("figcaption", {}, item.title)),
        h("div", {}, h("h3", {}, t.attract), bars(item.top, t.taught)));
      shownSample = index;
    }
    attractTimer = setTimeout(drawAttract, period - (Date.now() % period) + 20);
  }

  // ------------------------------------------------------------------ a photo: shrink, post, draw the answer
  async function shrunk(blob) {
    // A phone's 12-megapixel photo is sent at twice the model's resize on its short side (what the model needs,
    // a tenth of the bytes over the booth's Wi-Fi); the bitmap also draws what the model sees. A file the browser
    // cannot decode is sent as it is: the server says what is wrong with it.
    let bitmap = null;
    try {
      bitmap = await createImageBitmap(blob);
    } catch (e) {
      return { body: blob, bitmap: null };
    }
    const short = Math.min(bitmap.width, bitmap.height);
    const most = 2 * d.resize;
    if (short <= most) return { body: blob, bitmap };
    const scale = most / short;
    const canvas = h("canvas");
    canvas.width = Math.round(bitmap.width * scale);
    canvas.height = Math.round(bitmap.height * scale);
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    const body = await new Promise((resolve) => canvas.toBlob(resolve, "image/jpeg", 0.92));
    return { body: body || blob, bitmap };
  }

  async function modelView(bitmap) {
    // The guide's preprocessing, drawn: the short side resized to `resize`, the centre `crop`×`crop` kept
    const side = (d.crop * Math.min(bitmap.width, bitmap.height)) / d.resize;
    const canvas = h("canvas");
    canvas.width = canvas.height = d.crop;
    canvas.getContext("2d").drawImage(bitmap, (bitmap.width - side) / 2, (bitmap.height - side) / 2, side, side,
      0, 0, d.crop, d.crop);
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/jpeg", 0.85));
    return blob ? URL.createObjectURL(blob) : null;
  }

  async function post(route, query, body, signal, who = visitor) {
    const response = await fetch(`${d.api}/${route}?${new URLSearchParams(query)}`, {
      method: "POST", body, headers: { ...xsrfHeaders(), "X-Booth-Visitor": who }, credentials: "same-origin",
      signal });
    if (response.ok) return response;
    let message = `The booth could not answer (HTTP ${response.status}); please try again.`;
    try {
      message = (await response.json()).error || message;
    } catch (e) { /* not JSON: the line above */ }
    throw new Error(message);
  }

  async function classify(blob, name) {
    forget();
    const mine = visit;
    const controller = new AbortController();
    inflight = controller;
    current = { body: blob, name, bitmap: null, urls: [], top: null };
    clearTimeout(attractTimer);
    attract.hidden = true;
    attract.replaceChildren(); // drawn again, at the sample of the moment, when the visitor has gone
    error.hidden = true;
    answer.replaceChildren();
    how.replaceChildren();
    busy.hidden = false;
    after.hidden = false;
    try {
      const { body, bitmap } = await shrunk(blob);
      if (mine !== visit) return;
      current.body = body;
      current.bitmap = bitmap;
      const result = await (await post("classify", { name }, body, controller.signal)).json();
      if (mine !== visit) return;
      inflight = null;
      busy.hidden = true;
      current.top = result.top[0];
      drawAnswer(result);
      await drawHow(result, blob, bitmap, mine);
    } catch (e) {
      if (mine !== visit || e.name === "AbortError") return;
      forget();
      busy.hidden = true;
      after.hidden = true;
      fail(reached(e));
      showAttract();
      return;
    }
    tap(); // the idle time starts once the answer is shown
  }

  function drawAnswer(result) {
    const top = result.top[0];
    const figures = [`${Math.round(result.latency_ms)} ms`, d.device, d.backend];
    const note = result.batch_size <= 1 ? t.alone
      : t.shared.replace("{n}", result.batch_size).replace("{queued}", Math.round(result.queued_ms));
    const toggle = h("input", { type: "checkbox", role: "switch", class: "booth-switch-input" });
    const cam = h("figure", { class: "booth-cam" });
    cam.hidden = true;
    toggle.addEventListener("change", () => heatmap(toggle, cam));
    // the DOM's replaceChildren writes a null as the text "null": the optional line goes through h()'s filter
    answer.replaceChildren(...h("div", {},
      top.taught ? h("h2", {}, "I think it's ", h("b", {}, top.label), ` (${percent(top.prob)})`)
        : h("h2", {}, `I think it's ${article(top.label)} `, h("b", {}, top.label), ` (${percent(top.prob)})`),
      top.taught ? h("p", { class: "booth-taught-line" }, h("span", { class: "booth-taught" }, t.taught), " ",
        learnedLine()) : null,
      bars(result.top, t.taught),
      h("div", { class: "booth-metrics" }, ...t.metrics.map((label, i) => h("div", { class: "booth-metric" },
        h("div", { class: "booth-metric-label" }, label), h("div", { class: "booth-metric-value" }, figures[i])))),
      h("p", { class: "booth-note" }, note),
      h("label", { class: "booth-switch" }, toggle, h("span", { class: "booth-slider" }), icon("fire"),
        h("span", {}, "Where did the model look?")),
      cam).childNodes);
  }

  async function drawHow(result, blob, bitmap, mine) {
    const photo = URL.createObjectURL(blob);
    current.urls.push(photo);
    const seen = bitmap ? await modelView(bitmap) : null;
    if (mine !== visit) {
      if (seen) URL.revokeObjectURL(seen);
      return;
    }
    if (seen) current.urls.push(seen);
    const top = result.top[0];
    const known = taught.learned ? t.known_taught.replace("{classes}", d.classes)
      .replace("{taught}", taught.learned.names.length) : t.known.replace("{classes}", d.classes);
    how.replaceChildren(h("h3", {}, "How it works"), h("div", { class: "booth-how-grid" },
      h("figure", {}, h("img", { src: photo, alt: "Your photo" }), h("figcaption", {}, "1 · Your photo")),
      seen ? h("figure", {}, h("img", { src: seen, alt: "What the model sees" }), h("figcaption", {}, t.seen)) : null,
      h("div", {}, h("p", {}, h("b", {}, "3 · The answer")), h("h3", {}, top.label),
        h("p", {}, `${percent(top.prob)} sure, ${known}`))));
  }

  async function heatmap(toggle, cam) {
    tap();
    if (!toggle.checked) {
      cam.hidden = true;
      return;
    }
    cam.hidden = false;
    if (cam.dataset.drawn || !current) return;
    const mine = visit;
    const top = current.top;
    cam.replaceChildren(h("p", { class: "booth-busy", role: "status" }, "Looking where the model looked…"));
    try {
      const response = await post("heatmap", { index: top.index, name: current.name }, current.body);
      const url = URL.createObjectURL(await response.blob());
      if (mine !== visit) {
        URL.revokeObjectURL(url);
        return;
      }
      current.urls.push(url);
      cam.dataset.drawn = "1";
      const caption = t.heatmap.replace("{label}", top.label);
      cam.replaceChildren(h("img", { src: url, alt: caption }), h("figcaption", {}, caption));
    } catch (e) {
      if (mine !== visit) return;
      cam.replaceChildren(h("p", { class: "booth-error" }, reached(e)));
    }
    tap();
  }

  // ------------------------------------------------------------------ the Teach tab
  function learnedLine() { // "The big model stayed frozen: … in N ms on DEVICE."
    const l = taught.learned;
    if (!l) return "";
    // the head's training alone (train_ms) where the server says it, else the whole request's time
    const ms = Number.isFinite(l.train_ms) ? l.train_ms : l.learn_ms;
    return t.learned.replace("{examples}", l.examples).replace("{names}", l.names.length)
      .replace("{ms}", Math.round(ms)).replace("{device}", l.device || d.device);
  }

  function teachFail(message) {
    teachError.replaceChildren(message); // a visitor's name may be quoted in it: text, never HTML
    teachError.hidden = !message;
  }

  function drawNames() {
    const entries = [...taught.names.entries()];
    nameList.replaceChildren(...entries.map(([name, entry]) => {
      const pick = h("button", { type: "button", class: "booth-name-pick", title: "Add photos to this name" },
        h("span", { class: "booth-name-text" }, name),
        h("span", { class: "booth-name-count" }, `${entry.count} ${entry.count === 1 ? "photo" : "photos"}`));
      pick.addEventListener("click", () => { nameInput.value = name; tap(); });
      return h("li", { class: "booth-name-item" }, pick,
        h("span", { class: "booth-thumbs" }, ...entry.thumbs.map((url) => h("img", { src: url, alt: "" }))));
    }));
    const short = entries.filter(([, e]) => e.count < k.min_photos).map(([n]) => n);
    const ready = entries.length >= k.min_names && !short.length && !taught.pending && !taught.learning;
    learnButton.disabled = !ready;
    learnHint.textContent = taught.learning ? "" : entries.length < k.min_names
      ? t.need_names.replace("{n}", k.min_names - entries.length)
      : short.length ? t.need_photos.replace("{min}", k.min_photos).replace("{name}", short[0])
        : taught.stale ? t.stale : "";
    forgetButton.hidden = !taught.sent;
  }

  function thumbnail(bitmap) {
    if (!bitmap) return null;
    const canvas = h("canvas");
    const side = Math.min(bitmap.width, bitmap.height);
    canvas.width = canvas.height = 48;
    canvas.getContext("2d").drawImage(bitmap, (bitmap.width - side) / 2, (bitmap.height - side) / 2, side, side,
      0, 0, 48, 48);
    return new Promise((resolve) => canvas.toBlob((b) => resolve(b ? URL.createObjectURL(b) : null), "image/jpeg",
      0.8));
  }

  async function teachPhotos(blobs) {
    const name = nameInput.value.trim();
    teachFail("");
    if (!name) {
      teachFail(t.need_name);
      nameInput.focus();
      return;
    }
    const mine = lessonNo;
    const who = visitor;
    taught.pending += blobs.length;
    taught.sent = true;
    drawNames();
    let taken = 0;
    const queue = [...blobs];
    const one = async () => { // each photo in the booth's worker, batched with the other visitors' photos
      while (queue.length && mine === lessonNo) {
        const blob = queue.shift();
        taken += 1;
        try {
          const { body, bitmap } = await shrunk(blob);
          const answered = await (await post("teach", { name }, body, undefined, who)).json();
          const thumb = await thumbnail(bitmap);
          if (bitmap && bitmap.close) bitmap.close();
          if (mine !== lessonNo) { // forgotten meanwhile: this photo's features went to the old id; drop them too
            if (thumb) URL.revokeObjectURL(thumb);
            forgetOn(who);
            continue;
          }
          for (const [n, count] of Object.entries(answered.names)) {
            const entry = taught.names.get(n) || { count: 0, thumbs: [] };
            entry.count = count;
            taught.names.set(n, entry);
          }
          const entry = taught.names.get(answered.name);
          if (entry && thumb && entry.thumbs.length < 6) entry.thumbs.push(thumb);
          else if (thumb) URL.revokeObjectURL(thumb);
          if (taught.learned) taught.stale = true;
        } catch (e) {
          if (mine !== lessonNo) continue;
          queue.length = 0; // one line, and the rest of this choice is not sent (an over-cap answer would repeat)
          teachFail(reached(e));
        } finally {
          if (mine === lessonNo) {
            taught.pending -= 1;
            teachStatus.textContent = taught.pending ? t.sending.replace("{n}", taught.pending) : "";
            drawNames();
            tap();
          }
        }
      }
    };
    teachStatus.textContent = t.sending.replace("{n}", taught.pending);
    await one(); // one photo at a time: the server answers a visitor's second photo under way with 429
    if (mine === lessonNo) { // the photos not sent after an error line
      taught.pending -= blobs.length - taken;
      teachStatus.textContent = "";
      drawNames();
    }
  }

  function lossChart() { // an inline SVG the screen draws itself: the training loss per step, lower is better
    const W = 480, H = 200, L = 46, R = 10, T = 12, B = 30;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "booth-loss", role: "img", "aria-label": t.loss });
    chart.append(svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "booth-axis" }),
      svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "booth-axis" }));
    const text = (x, y, words, anchor) => {
      const node = svg("text", { x, y, "text-anchor": anchor, class: "booth-axis-text" });
      node.textContent = words;
      chart.append(node);
      return node;
    };
    text((L + W - R) / 2, H - 6, "training step", "middle");
    const yTop = text(L - 6, T + 10, "", "end");
    text(L - 6, H - B, "0", "end");
    const line = svg("polyline", { class: "booth-loss-line", points: "" });
    const dot = svg("circle", { r: 4, class: "booth-loss-dot" });
    dot.setAttribute("visibility", "hidden");
    chart.append(line, dot);
    return {
      node: chart,
      draw(losses, upto) { // the first `upto` points of the curve, on axes for the whole of it
        const top = Math.max(...losses, 1e-6);
        yTop.textContent = top.toFixed(2);
        const x = (i) => L + ((W - L - R) * i) / Math.max(losses.length - 1, 1);
        const y = (v) => H - B - ((H - B - T) * v) / top;
        const shown = losses.slice(0, upto);
        line.setAttribute("points", shown.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" "));
        chart.setAttribute("data-points", String(shown.length));
        if (shown.length) {
          dot.setAttribute("cx", x(shown.length - 1).toFixed(1));
          dot.setAttribute("cy", y(shown[shown.length - 1]).toFixed(1));
          dot.setAttribute("visibility", "visible");
        }
      },
    };
  }

  async function learn() {
    teachFail("");
    const mine = lessonNo;
    taught.learning = true;
    drawNames();
    const chart = lossChart();
    const heading = h("h3", {}, t.learning);
    const line = h("p", { class: "booth-learned" });
    lesson.replaceChildren(heading, chart.node, h("p", { class: "booth-caption" }, t.loss), line);
    attract.hidden = true;
    clearTimeout(attractTimer);
    lesson.scrollIntoView({ block: "nearest", behavior: "smooth" });
    try {
      const result = await (await post("learn", {}, null)).json();
      if (mine !== lessonNo) return;
      taught.learned = result;
      taught.stale = false;
      // The head's steps, drawn one by one as the curve a trainer watches (a few hundred ms in all on this booth)
      const losses = result.loss.map(Number);
      const each = Math.max(8, Math.min(60, 1500 / Math.max(losses.length, 1)));
      for (let i = 1; i <= losses.length; i += 1) {
        if (mine !== lessonNo) return;
        chart.draw(losses, i);
        await new Promise((resolve) => setTimeout(resolve, each));
      }
      heading.textContent = t.learned_title.replace("{names}", result.names.length);
      line.replaceChildren(learnedLine());
      lesson.append(h("p", { class: "booth-note" }, t.try_it));
    } catch (e) {
      if (mine !== lessonNo) return;
      lesson.replaceChildren();
      showAttract();
      teachFail(reached(e));
    } finally {
      if (mine === lessonNo) {
        taught.learning = false;
        drawNames();
        tap();
      }
    }
  }

  function forgetOn(who) { // drop what `who` taught on the server; a late or failed answer changes nothing here
    fetch(`${d.api}/forget`, { method: "POST", headers: { ...xsrfHeaders(), "X-Booth-Visitor": who },
      credentials: "same-origin", keepalive: true }).catch(() => {});
  }

  function forgetTaught() { // everything taught, here and on the server, and a new visitor id
    lessonNo += 1;
    if (taught.sent) forgetOn(visitor);
    for (const entry of taught.names.values()) for (const url of entry.thumbs) URL.revokeObjectURL(url);
    taught = { names: new Map(), sent: false, learned: null, stale: false, pending: 0, learning: false };
    visitor = newVisitorId();
    nameInput.value = "";
    teachStatus.textContent = "";
    teachFail("");
    lesson.replaceChildren();
    drawNames();
  }

  // ------------------------------------------------------------------ the camera and the uploader
  async function startCamera() {
    if (stream || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      if (!stream) cameraNote.textContent = "“Take a picture” opens this device's camera.";
      return;
    }
    try {
      stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment" }, audio: false });
      video.srcObject = stream;
      video.hidden = false;
      cameraNote.textContent = "";
    } catch (e) {
      stream = null;
      cameraNote.textContent = "No camera could start here: “Take a picture” opens this device's camera or a file.";
    }
  }

  function stopCamera() {
    if (stream) for (const track of stream.getTracks()) track.stop();
    stream = null;
    video.srcObject = null;
    video.hidden = true;
  }

  function show(name) {
    for (const [which, button] of Object.entries(tabs)) {
      button.setAttribute("aria-selected", String(which === name));
      panels[which].hidden = which !== name;
    }
    fileFor = name === "teach" ? "teach" : "classify";
    asUploader();
    if (name === "teach") {
      teachCam.append(video, cameraNote);
      teachDrop.append(file);
    } else {
      panels.camera.prepend(video);
      panels.camera.append(cameraNote);
      uploadDrop.append(file);
    }
    if (name === "upload") stopCamera();
    else startCamera();
  }

  function snapshot(then) { // the live camera's frame, or the device's own camera app (a phone), or a file
    if (!stream || !video.videoWidth) {
      file.setAttribute("capture", "environment");
      file.accept = "image/*"; // what phones open their camera for
      file.multiple = false;
      file.click();
      return;
    }
    const canvas = h("canvas");
    canvas.width = video.videoWidth;
    canvas.height = video.videoHeight;
    canvas.getContext("2d").drawImage(video, 0, 0);
    canvas.toBlob((blob) => blob && then(blob), "image/jpeg", 0.92);
  }

  tabs.camera.addEventListener("click", () => show("camera"));
  tabs.upload.addEventListener("click", () => show("upload"));
  tabs.teach.addEventListener("click", () => show("teach"));
  shoot.addEventListener("click", () => snapshot((blob) => classify(blob, "camera.jpg")));
  teachShoot.addEventListener("click", () => snapshot((blob) => teachPhotos([blob])));
  const asUploader = () => { // the input back to choosing files (after the camera app was asked for)
    file.removeAttribute("capture");
    file.accept = d.accept;
    file.multiple = fileFor === "teach";
    file.setAttribute("aria-label", fileFor === "teach" ? "Add photos of it" : "Upload a photo");
  };
  file.addEventListener("cancel", asUploader);
  file.addEventListener("change", () => {
    asUploader();
    const chosen = [...(file.files || [])];
    if (!chosen.length) return;
    if (fileFor === "teach") {
      teachPhotos(chosen.slice(0, k.max_photos));
      file.value = "";
    } else classify(chosen[0], chosen[0].name);
  });
  for (const drop of [uploadDrop, teachDrop]) {
    drop.addEventListener("dragover", (e) => e.preventDefault());
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      const chosen = [...((e.dataTransfer && e.dataTransfer.files) || [])];
      if (!chosen.length) return;
      if (drop === teachDrop) teachPhotos(chosen.slice(0, k.max_photos));
      else classify(chosen[0], chosen[0].name);
    });
  }
  learnButton.addEventListener("click", learn);
  forgetButton.addEventListener("click", () => {
    forgetTaught();
    startOver();
    teachStatus.textContent = t.forgotten;
  });
  nameInput.addEventListener("input", () => { teachFail(""); tap(); });
  restart.addEventListener("click", startOver);
  root.addEventListener("pointerdown", () => { if (active()) tap(); });
  const onVisibility = () => {
    if (document.hidden) stopCamera();
    else if (panels.upload.hidden) startCamera();
  };
  document.addEventListener("visibilitychange", onVisibility);

  show("camera");
  drawNames();
  showAttract();
  return () => {
    forget();
    if (taught.sent) forgetOn(visitor);
    stopCamera();
    clearTimeout(idleTimer);
    clearTimeout(attractTimer);
    document.removeEventListener("visibilitychange", onVisibility);
  };
}
