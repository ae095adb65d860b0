//! The HTML report on the lab captures: self-contained, a graph for every finding, the same
//! findings as the JSON output, strings escaped; rendered in headless Chromium (Debian's
//! chromium, which CI installs) with no console message, and a screenshot produced.

use crate::common::{fixture, lab_fixture, tcpwhy, TempDir};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const REPORTS: [&str; 7] = [
    "stale-syn-timewait-broken.pcap.gz",
    "stale-syn-lost-rst-broken.pcap",
    "slow-start-after-idle-broken.pcap.gz",
    "nagle-delayed-ack-broken.pcap",
    "syn-backlog-full-broken.pcap",
    "tail-loss-broken.pcap",
    "tail-loss-control.pcap",
];

fn tmpdir(tag: &str) -> TempDir {
    TempDir::new(&format!("html-{tag}"))
}

fn html_of(file: &str, out: &Path) -> String {
    let o = tcpwhy(&[
        "analyze",
        "--format",
        "html",
        "-o",
        out.to_str().unwrap(),
        file,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{file}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(out).unwrap()
}

fn json_findings(file: &str) -> Vec<Value> {
    let o = tcpwhy(&["analyze", "--format", "json", file]);
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "finding")
        .collect()
}

#[test]
fn every_finding_has_its_graph_and_the_same_findings_as_json() {
    let dir = tmpdir("graphs");
    for name in REPORTS {
        let file = lab_fixture(name);
        let html = html_of(&file, &dir.join("r.html"));
        let findings = json_findings(&file);
        assert_eq!(
            html.matches("<section class=\"finding\"").count(),
            findings.len(),
            "{name}"
        );
        // A graph in every finding's section (slow start after idle: one per restarted burst).
        for section in html.split("<section class=\"finding\"").skip(1) {
            let section = &section[..section.find("</section>").unwrap()];
            assert!(
                section.contains("<svg class=\"graph "),
                "{name}: no graph in {section}"
            );
        }
        for f in &findings {
            // The same evidence filter and explanation as the JSON record (escaped).
            let filter = f["wireshark_filter"].as_str().unwrap();
            assert!(html.contains(filter), "{name}: {filter}");
        }
        // Self-contained: nothing fetched from anywhere.
        for bad in ["http://", "https://", " src=", "@import", "url(http"] {
            assert!(!html.contains(bad), "{name} references {bad}");
        }
        if findings.is_empty() {
            assert!(html.contains("No latency cause found"), "{name}");
        }
    }
}

#[test]
fn slow_start_graph_shows_the_flights_and_stale_syn_the_ladder() {
    let dir = tmpdir("pictures");
    // Both restarted bursts after 3 s idle: flights of 10, 20, 40, 80, 160, 320 segments
    // (fixtures/lab/README.md, read off with tshark), labelled on the graph, one panel each.
    let html = html_of(
        &lab_fixture("slow-start-after-idle-broken.pcap.gz"),
        &dir.join("s.html"),
    );
    let labels: Vec<&str> = html
        .match_indices("fill=\"#1f77b4\">")
        .map(|(i, m)| {
            let rest = &html[i + m.len()..];
            &rest[..rest.find('<').unwrap()]
        })
        .collect();
    let burst = ["10", "20", "40", "80", "160", "320"];
    assert!(labels.starts_with(&burst), "{labels:?}");
    assert_eq!(html.matches("<svg class=\"graph tsg\"").count(), 2);
    assert_eq!(
        labels.iter().filter(|l| **l == "320").count(),
        2,
        "{labels:?}"
    );
    assert_eq!(html.matches("3051 ms idle before").count(), 2);
    // The stale-state exchange: SYN, ACK with old numbers, RST, the same SYN, SYN-ACK (frames
    // 1341-1345, hand-checked with tshark), in this order on the ladder.
    let html = html_of(
        &lab_fixture("stale-syn-timewait-broken.pcap.gz"),
        &dir.join("t.html"),
    );
    let ladder = &html[html.find("class=\"graph ladder\"").unwrap()..];
    let ladder = &ladder[..ladder.find("</svg>").unwrap()];
    let order: Vec<usize> = [
        "SYN seq=3712605189",
        "ACK ack=3713262130",
        ">RST<",
        "#1344",
        "SYN ACK seq=",
    ]
    .iter()
    .map(|s| ladder.find(s).unwrap_or_else(|| panic!("{s} missing")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
}

#[test]
fn strings_from_the_command_line_and_capture_are_escaped() {
    let dir = tmpdir("escape");
    let odd = dir.join("a<b>&\"c'.pcap");
    std::fs::copy(fixture("veth-mixed.pcap"), &odd).unwrap();
    let html = html_of(odd.to_str().unwrap(), &dir.join("e.html"));
    assert!(html.contains("a&lt;b&gt;&amp;&quot;c&#39;.pcap"));
    assert!(!html.contains("a<b>"));
}

#[test]
fn html_from_standard_input() {
    let dir = tmpdir("stdin");
    let out = dir.join("in.html");
    let o = Command::new(env!("CARGO_BIN_EXE_tcpwhy"))
        .args([
            "analyze",
            "--format",
            "html",
            "-o",
            out.to_str().unwrap(),
            "-",
        ])
        .stdin(std::fs::File::open(lab_fixture("nagle-delayed-ack-broken.pcap")).unwrap())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let html = std::fs::read_to_string(&out).unwrap();
    assert_eq!(html.matches("<svg class=\"graph ").count(), 1);
}

fn chromium() -> Option<&'static str> {
    let ok = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some("chromium");
    }
    if std::env::var("TCPWHY_SKIP_CHROMIUM").as_deref() != Ok("1") {
        panic!("chromium is needed for this test: apt-get install chromium (or TCPWHY_SKIP_CHROMIUM=1)");
    }
    None
}

fn headless(dir: &Path, extra: &[&str], page: &Path) -> std::process::Output {
    let profile = dir.join("profile");
    let mut args = vec![
        "--headless".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--disable-quic".into(),
        "--no-first-run".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--hide-scrollbars".into(),
        "--enable-logging=stderr".into(),
        "--v=0".into(),
        format!("--user-data-dir={}", profile.display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.push(format!("file://{}", page.display()));
    Command::new("timeout")
        .arg("120")
        .arg("chromium")
        .args(&args)
        .output()
        .expect("run chromium")
}

#[test]
fn reports_load_in_headless_chromium_without_console_messages() {
    let Some(_) = chromium() else { return };
    let dir = tmpdir("chromium");
    for name in REPORTS {
        let page = dir.join(format!("{name}.html"));
        let html = html_of(&lab_fixture(name), &page);
        let graphs = html.matches("<svg class=\"graph ").count();
        let o = headless(dir.path(), &["--dump-dom"], &page);
        let dom = String::from_utf8_lossy(&o.stdout);
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(
            dom.contains("data-ready=\"yes\""),
            "{name}: script did not run\n{log}"
        );
        assert_eq!(dom.matches("class=\"graph ").count(), graphs, "{name}");
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "{name}: {console:?}");
    }
    let shot = dir.join("shot.png");
    let page = dir.join("stale-syn-timewait-broken.pcap.gz.html");
    let o = headless(
        dir.path(),
        &[
            "--window-size=1100,1400",
            &format!("--screenshot={}", shot.display()),
        ],
        &page,
    );
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.len() > 20_000, "{} bytes", png.len());
}

/// Low-confidence findings are shown apart, under "Less certain", with their reasons, and are
/// not in the ranked chart; the text report does the same. In zeek_http_bro.org (the real-world
/// corpus, ../shared/corpus/real) a browser pre-connects six connections and uses one 3.6 s
/// later: its client-delay is low confidence (a wait of a second or more). Skipped with a
/// message without the corpus.
#[test]
fn low_confidence_findings_are_shown_apart() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/real/zeek_http_bro.org.pcap");
    if !file.exists() {
        eprintln!("SKIPPED: no {}", file.display());
        return;
    }
    let file = file.to_string_lossy().into_owned();
    let low: Vec<Value> = json_findings(&file)
        .into_iter()
        .filter(|f| f["confidence"]["level"] == "low")
        .collect();
    assert!(low.iter().any(|f| f["id"] == "client-delay"), "{low:?}");
    let dir = tmpdir("low");
    let html = html_of(&file, &dir.join("r.html"));
    let apart = html.find("<h2>Less certain</h2>").expect("a section apart");
    let rto = html
        .find("data-id=\"client-delay\"")
        .expect("the rto finding is listed");
    assert!(rto > apart, "listed under Less certain");
    assert!(html.contains(
        "Confidence low: a wait of a second or more is most often a connection opened ahead of use"
    ));
    assert!(
        !html.contains("<a href=\"#cause-client-delay\">"),
        "not in the ranked chart"
    );
    let text = tcpwhy(&["analyze", &file]);
    let text = String::from_utf8_lossy(&text.stdout);
    let apart = text
        .find("Less certain (low confidence, not ranked above):")
        .expect("the text report too");
    assert!(text[apart..].contains("- client-delay:"), "{text}");
    assert!(!text[..apart].contains(". client-delay:"), "{text}");
}

/// A script appended to a copy of a report: it measures the page as Chromium laid it out and
/// writes the numbers into `<pre id="probe">` for `--dump-dom` (the report itself is
/// unchanged). Per time-sequence graph: the series its legend names, the series drawn inside
/// its plot, whether each retransmission is the topmost element at its own centre, the panel
/// label, the shaded span and the evidence circles' centres by frame.
const PROBE: &str = r#"<script>(function(){
var r={}, de=document.documentElement;
r.scroll_width=de.scrollWidth; r.client_width=de.clientWidth;
var a=document.querySelector('.answer'); r.answer=a?a.textContent:'';
function inside(b,p){return b.x<=p.x+p.width&&b.x+b.width>=p.x&&b.y<=p.y+p.height&&b.y+b.height>=p.y;}
r.graphs=[];
document.querySelectorAll('svg.tsg').forEach(function(svg){
  var g={legend:[],drawn:[],retx_on_top:[],label:null,shade:null,circles:{}};
  var plot=svg.querySelector('clipPath rect').getBBox();
  var leg=svg.nextElementSibling;
  leg.querySelectorAll('[data-series]').forEach(function(s){g.legend.push(s.getAttribute('data-series'));});
  ['s-data','s-retx','s-ack','s-win','s-ev','s-finding'].forEach(function(c){
    var els=svg.querySelectorAll('.'+c);
    for(var i=0;i<els.length;i++){ if(inside(els[i].getBBox(),plot)){g.drawn.push(c);break;} }
  });
  svg.querySelectorAll('.s-retx').forEach(function(el){
    el.scrollIntoView({block:'center'});
    var b=el.querySelector('rect').getBoundingClientRect();
    var hit=document.elementFromPoint(b.x+b.width/2,b.y+b.height/2);
    g.retx_on_top.push(!!hit&&hit.closest('.s-retx')===el);
  });
  // SVG paints in document order: a retransmission after every circle is painted over them.
  var circles=svg.querySelectorAll('.s-ev'), last=circles[circles.length-1];
  g.retx_after_circles=[].every.call(svg.querySelectorAll('.s-retx'),function(el){
    return !last||!!(last.compareDocumentPosition(el)&Node.DOCUMENT_POSITION_FOLLOWING);});
  var l=svg.querySelector('.panel-label'); if(l) g.label=l.textContent;
  var sh=svg.querySelector('.s-finding'); if(sh){var b=sh.getBBox(); g.shade=[b.x,b.x+b.width];}
  svg.querySelectorAll('.s-ev').forEach(function(c){g.circles[c.getAttribute('data-frame')]=parseFloat(c.getAttribute('cx'));});
  r.graphs.push(g);
});
r.hist_labels_outside=0;
document.querySelectorAll('svg.hist text').forEach(function(t){
  var b=t.getBBox(); if(b.x<0||b.x+b.width>1000) r.hist_labels_outside++;
});
r.hist_legend=[].map.call(document.querySelectorAll('svg.hist + .legend span'),function(s){return s.textContent;});
r.hist_colors=[].map.call(document.querySelectorAll('svg.hist rect'),function(x){return x.getAttribute('fill');});
r.waits=[].map.call(document.querySelectorAll('svg.ladder .wait + text'),function(t){return t.textContent;});
var p=document.createElement('pre'); p.id='probe'; p.textContent=JSON.stringify(r);
document.body.appendChild(p);
})();</script>"#;

/// `file`'s report laid out by Chromium `width` pixels wide: the probe's measurements.
fn probe(file: &str, width: u32, dir: &Path) -> Option<Value> {
    chromium()?;
    let page = dir.join("probed.html");
    let html = html_of(file, &page);
    let probed = html.replace("</body>", &format!("{PROBE}</body>"));
    std::fs::write(&page, probed).unwrap();
    let o = headless(
        dir,
        &["--dump-dom", &format!("--window-size={width},1000")],
        &page,
    );
    let dom = String::from_utf8_lossy(&o.stdout);
    let start = dom.find("<pre id=\"probe\">").expect("the probe ran") + 16;
    let end = start + dom[start..].find("</pre>").expect("the probe's end");
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    Some(serde_json::from_str(&text).expect("the probe wrote JSON"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

/// Seen in Chromium, on the lab's reports: legends name exactly the series drawn, every
/// retransmission is drawn over any evidence circle, the histogram's labels stay inside it and
/// its legend names the parts its bars show, and at 700 px nothing scrolls sideways.
#[test]
fn legends_retransmissions_and_narrow_windows_in_chromium() {
    let dir = tmpdir("probe");
    let mut retx_checked = 0;
    for name in REPORTS {
        let Some(p) = probe(&lab_fixture(name), 700, dir.path()) else {
            return;
        };
        assert!(
            p["scroll_width"].as_u64() <= p["client_width"].as_u64(),
            "{name}: the page scrolls sideways at 700 px: {} > {}",
            p["scroll_width"],
            p["client_width"]
        );
        for g in p["graphs"].as_array().into_iter().flatten() {
            let mut legend = strings(&g["legend"]);
            let mut drawn = strings(&g["drawn"]);
            legend.sort();
            drawn.sort();
            assert_eq!(legend, drawn, "{name}: the legend and what is drawn differ");
            assert_eq!(
                g["retx_after_circles"], true,
                "{name}: a circle painted over a resend"
            );
            for on_top in g["retx_on_top"].as_array().into_iter().flatten() {
                assert_eq!(on_top, true, "{name}: a retransmission is hidden");
                retx_checked += 1;
            }
        }
        assert_eq!(
            p["hist_labels_outside"], 0,
            "{name}: a histogram label is cut"
        );
        // One legend entry per colour the bars use.
        let mut colors = strings(&p["hist_colors"]);
        colors.sort();
        colors.dedup();
        assert_eq!(
            colors.len(),
            strings(&p["hist_legend"]).len(),
            "{name}: {:?} for {colors:?}",
            p["hist_legend"]
        );
    }
    // tail-loss-broken resends segments inside its findings' graphs.
    assert!(
        retx_checked >= 2,
        "only {retx_checked} retransmissions seen"
    );
}

/// Slow start after idle restarts twice in this capture (1 048 576 B each, after 3 s idle):
/// one panel per burst, each shading its own burst from its first segment (the restart frame
/// of the finding's details), labelled, with that frame marked.
#[test]
fn each_slow_start_panel_shades_and_labels_its_own_burst() {
    let dir = tmpdir("ssr");
    let file = lab_fixture("slow-start-after-idle-broken.pcap.gz");
    let finding = json_findings(&file)
        .into_iter()
        .find(|f| f["id"] == "slow-start-restart")
        .expect("the finding");
    let restarts = finding["details"]["restarts"].as_array().expect("restarts");
    assert_eq!(restarts.len(), 2);
    let Some(p) = probe(&file, 1100, dir.path()) else {
        return;
    };
    let panels: Vec<&Value> = p["graphs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| g["label"].is_string())
        .collect();
    assert_eq!(panels.len(), 2, "{p}");
    for (i, (g, r)) in panels.iter().zip(restarts).enumerate() {
        let label = g["label"].as_str().unwrap_or_default();
        assert!(
            label.starts_with(&format!("burst {} of 2: 1048.6 kB in 30", i + 1)),
            "{label}"
        );
        let frame = r["frame"].as_u64().expect("the restart frame").to_string();
        let cx = g["circles"][&frame]
            .as_f64()
            .unwrap_or_else(|| panic!("panel {}: frame {frame} not marked: {g}", i + 1));
        let (s0, s1) = (
            g["shade"][0].as_f64().unwrap_or(0.0),
            g["shade"][1].as_f64().unwrap_or(0.0),
        );
        // The shade begins at the burst's first segment (not 100 ms before it) and covers
        // the burst (302 ms) of a window two round trips wider on each side (503 ms) drawn
        // over 910 units: 546 wide.
        let took = r["took_ms"].as_f64().unwrap_or(0.0);
        let rtt = finding["details"]["rtt_ms"].as_f64().unwrap_or(0.0);
        let want = took / (took + 4.0 * rtt) * 910.0;
        assert!(
            (s0 - cx).abs() <= 2.0,
            "panel {}: shade from {s0}, burst at {cx}",
            i + 1
        );
        assert!(
            (s1 - s0 - want).abs() < 3.0,
            "panel {}: shade {s0}..{s1}, want {want}",
            i + 1
        );
    }
}

/// The client's wait in zeek_http_bro.org (real-world corpus): a ladder with the wait as a
/// row of its own, and the headline's sum over the 2 ranked causes (the low-confidence wait is
/// apart) says it is summed over connections.
#[test]
fn a_client_wait_is_a_ladder_and_the_headline_says_what_it_sums() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/corpus/real/zeek_http_bro.org.pcap");
    if !file.exists() {
        eprintln!("SKIPPED: no {}", file.display());
        return;
    }
    let dir = tmpdir("wait");
    let Some(p) = probe(&file.to_string_lossy(), 1100, dir.path()) else {
        return;
    };
    // 3.6 s between the handshake's ACK (frame 710) and the request (724): tshark shows
    // frame.time_delta_displayed 3.613675 s for tcp.stream 12 between them.
    let waits = strings(&p["waits"]);
    assert!(
        waits
            .iter()
            .any(|w| w.contains("the client waited 3614 ms")),
        "{waits:?}"
    );
    let answer = p["answer"].as_str().unwrap_or_default();
    assert!(
        answer.contains("lost to all 2 causes, summed over the connections"),
        "{answer}"
    );
}
