// The booth's visitor screen (ui/booth.py mounts it; issue 30). It runs here, in the visitor's browser: a photo is
// posted to the booth's HTTP route (web/booth_api.py) and its answer drawn here, as are the photo and what the model
// saw, the heat map (posted again on demand), the attract view, "Start over" and the idle reset. None of it costs
// the server a script run. The photo lives in this page only, and is dropped on "Start over" and on idle.
// Every word shown comes from Python (data.texts); anything from a visitor or the model is set as text, never HTML.

// Plain line icons drawn for the booth (Debian's chromium has no emoji font: issue 18), inside a 24×24 box
const SVG = {
  camera: '<rect x="2.5" y="6.5" width="19" height="14" rx="2"/><path d="M8 6.5 9.5 3.5h5L16 6.5"/><circle cx="12" cy="13.5" r="4"/>',
  upload: '<path d="M12 16V4M6.5 9.5 12 4l5.5 5.5M4 15v5h16v-5"/>',
  restart: '<path d="M5 12a7 7 0 1 0 2.1-5M5 3v4.5h4.5"/>',
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

function bars(top) {
  return h("div", { class: "booth-bars" }, ...top.map((p) => {
    const fill = h("div", { class: "booth-fill" });
    fill.style.width = `${(p.prob * 100).toFixed(1)}%`;
    return h("div", { class: "booth-row" }, h("span", { class: "booth-label" }, p.label),
      h("div", { class: "booth-track" }, fill), h("span", { class: "booth-pct" }, percent(p.prob)));
  }));
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

  // ------------------------------------------------------------------ the page's parts
  const file = h("input", { type: "file", class: "booth-file", accept: d.accept, "aria-label": "Upload a photo" });
  const video = h("video", { class: "booth-video", playsinline: "", muted: "", autoplay: "" });
  video.hidden = true;
  const cameraNote = h("p", { class: "booth-note booth-camera-note" });
  const shoot = h("button", { type: "button", class: "booth-button booth-shoot" }, icon("camera"), "Take a picture");
  const tabs = { camera: h("button", { type: "button", role: "tab", class: "booth-tab", "data-tab": "camera" },
                           icon("camera"), "Camera"),
                 upload: h("button", { type: "button", role: "tab", class: "booth-tab", "data-tab": "upload" },
                           icon("upload"), "Upload") };
  const panels = {
    camera: h("div", { class: "booth-panel", role: "tabpanel", "data-panel": "camera" }, video, shoot, cameraNote),
    upload: h("div", { class: "booth-panel", role: "tabpanel", "data-panel": "upload" },
      h("label", { class: "booth-drop" }, icon("upload"), h("span", {}, "Drop a photo here, or tap to choose one"),
        h("small", {}, `JPG, PNG, WEBP, BMP or GIF, up to ${d.max_mb} MB`), file)),
  };
  const restart = h("button", { type: "button", class: "booth-button booth-restart" }, icon("restart"), "Start over");
  const after = h("div", { class: "booth-after" }, restart, h("p", { class: "booth-caption" }, t.idle));
  after.hidden = true;
  const controls = h("div", { class: "booth-controls" },
    h("div", { class: "booth-tabs", role: "tablist" }, tabs.camera, tabs.upload), panels.camera, panels.upload, after);

  const error = h("div", { class: "booth-error", role: "alert" });
  error.hidden = true;
  const attract = h("div", { class: "booth-attract" });
  const busy = h("p", { class: "booth-busy", role: "status" }, "Looking at your photo…");
  busy.hidden = true;
  const answer = h("div", { class: "booth-answer" });
  const how = h("div", { class: "booth-how" });
  const stage = h("div", { class: "booth-stage" }, error, busy, answer, attract, how);
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

  function reset() {
    forget();
    clearTimeout(idleTimer);
    idleTimer = null;
    answer.replaceChildren();
    how.replaceChildren();
    error.hidden = true;
    busy.hidden = true;
    after.hidden = true;
    showAttract();
  }

  function tap() { // the idle reset comes idle_s after the last tap while a photo is shown
    clearTimeout(idleTimer);
    idleTimer = current ? setTimeout(reset, d.idle_s * 1000) : null;
  }

  function fail(message) {
    error.replaceChildren(message);
    error.hidden = false;
  }

  // ------------------------------------------------------------------ the attract view (every screen shows the same)
  function showAttract() {
    attract.hidden = false;
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
        h("div", {}, h("h3", {}, t.attract), bars(item.top)));
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

  async function post(route, query, body, signal) {
    const response = await fetch(`${d.api}/${route}?${new URLSearchParams(query)}`, {
      method: "POST", body, headers: xsrfHeaders(), credentials: "same-origin", signal });
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
      fail(e instanceof TypeError ? "The booth could not be reached; please try again." : e.message);
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
    answer.replaceChildren(
      h("h2", {}, "I think it's a ", h("b", {}, top.label), ` (${percent(top.prob)})`),
      bars(result.top),
      h("div", { class: "booth-metrics" }, ...t.metrics.map((label, i) => h("div", { class: "booth-metric" },
        h("div", { class: "booth-metric-label" }, label), h("div", { class: "booth-metric-value" }, figures[i])))),
      h("p", { class: "booth-note" }, note),
      h("label", { class: "booth-switch" }, toggle, h("span", { class: "booth-slider" }), icon("fire"),
        h("span", {}, "Where did the model look?")),
      cam);
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
    how.replaceChildren(h("h3", {}, "How it works"), h("div", { class: "booth-how-grid" },
      h("figure", {}, h("img", { src: photo, alt: "Your photo" }), h("figcaption", {}, "1 · Your photo")),
      seen ? h("figure", {}, h("img", { src: seen, alt: "What the model sees" }), h("figcaption", {}, t.seen)) : null,
      h("div", {}, h("p", {}, h("b", {}, "3 · The answer")), h("h3", {}, top.label),
        h("p", {}, `${percent(top.prob)} sure, out of the ${d.classes} things it knows.`))));
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
      cam.replaceChildren(h("p", { class: "booth-error" },
        e instanceof TypeError ? "The booth could not be reached; please try again." : e.message));
    }
    tap();
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
    for (const [tab, button] of Object.entries(tabs)) {
      button.setAttribute("aria-selected", String(tab === name));
      panels[tab].hidden = tab !== name;
    }
    if (name === "camera") startCamera();
    else {
      stopCamera();
      asUploader();
    }
  }

  tabs.camera.addEventListener("click", () => show("camera"));
  tabs.upload.addEventListener("click", () => show("upload"));
  shoot.addEventListener("click", () => {
    if (!stream || !video.videoWidth) { // no live camera: the device's own camera app (a phone), or a file
      file.setAttribute("capture", "environment");
      file.accept = "image/*"; // what phones open their camera for
      file.click();
      return;
    }
    const canvas = h("canvas");
    canvas.width = video.videoWidth;
    canvas.height = video.videoHeight;
    canvas.getContext("2d").drawImage(video, 0, 0);
    canvas.toBlob((blob) => blob && classify(blob, "camera.jpg"), "image/jpeg", 0.92);
  });
  const asUploader = () => { // the input back to choosing a file (after the camera app was asked for)
    file.removeAttribute("capture");
    file.accept = d.accept;
  };
  file.addEventListener("cancel", asUploader);
  file.addEventListener("change", () => {
    asUploader();
    const chosen = file.files && file.files[0];
    if (chosen) classify(chosen, chosen.name);
  });
  const drop = panels.upload.querySelector(".booth-drop");
  drop.addEventListener("dragover", (e) => e.preventDefault());
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    const chosen = e.dataTransfer && e.dataTransfer.files[0];
    if (chosen) classify(chosen, chosen.name);
  });
  restart.addEventListener("click", reset);
  root.addEventListener("pointerdown", () => { if (current) tap(); });
  const onVisibility = () => {
    if (document.hidden) stopCamera();
    else if (!panels.camera.hidden) startCamera();
  };
  document.addEventListener("visibilitychange", onVisibility);

  show("camera");
  showAttract();
  return () => {
    forget();
    stopCamera();
    clearTimeout(idleTimer);
    clearTimeout(attractTimer);
    document.removeEventListener("visibilitychange", onVisibility);
  };
}
