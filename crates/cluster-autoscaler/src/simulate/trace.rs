//! Trace replay: rows of a workload trace CSV
//! (`name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority`) become pods
//! created at their (scaled) arrival time, owned by the trace's controller (a Job or a
//! ReplicaSet named after the workload) or bare, and annotated `safe-to-evict` if asked.
//!
//! It decides which rows are kept (sampling, start, limit, horizon) and what each pod looks like.
//! A pod runs for its (scaled) duration counted from when it starts running, not from its
//! creation: a pod that waits for a node still gets its full run. It never touches the world.
//!
//! Rows are read as they are asked for ([`TraceReader`]): the file is read once, in order, and
//! only the next row is held, so a replay's memory does not grow with the trace's length. Rows
//! must come in arrival order; one that arrives before the row above it is refused, naming its
//! line (a streamed replay cannot move it back in time).

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::scenario::TimedPod;
use autoscaler_model::SAFE_TO_EVICT_ANNOTATION;
use autoscaler_world::SimTime;

/// How rows are turned into pods.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Namespace of the pods.
    pub namespace: String,
    /// Multiplies arrival times and durations.
    pub time_scale: f64,
    /// Keep every Nth row.
    pub sample: usize,
    /// Skip rows arriving before this trace time (ms, before scaling); later arrivals are
    /// shifted so this time is virtual time 0.
    pub start_ms: SimTime,
    /// Keep at most this many rows.
    pub limit: usize,
    /// Drop rows arriving at or after this virtual time.
    pub horizon_ms: SimTime,
    /// GPU resource name.
    pub gpu_resource: String,
    /// Node label selecting the GPU model, if models are honoured.
    pub gpu_model_label: Option<String>,
    /// Tolerations of every pod.
    pub tolerations: Vec<Value>,
    /// Who owns the pods.
    pub owner: TraceOwner,
    /// The `cluster-autoscaler.kubernetes.io/safe-to-evict` annotation of every pod, if any.
    pub safe_to_evict: Option<bool>,
}

/// The controller of a trace's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceOwner {
    /// Bare pods: scale-down never moves them.
    None,
    /// The Job of this name: an evicted pod's replacement starts over.
    Job(String),
    /// The ReplicaSet of this name: an evicted pod's replacement runs the time it had left.
    ReplicaSet(String),
}

impl TraceOwner {
    /// The `ownerReferences` of a pod of this owner (`None` for bare pods).
    fn reference(&self) -> Option<Value> {
        let (api_version, kind, name) = match self {
            TraceOwner::None => return None,
            TraceOwner::Job(n) => ("batch/v1", "Job", n),
            TraceOwner::ReplicaSet(n) => ("apps/v1", "ReplicaSet", n),
        };
        Some(
            json!([{"apiVersion": api_version, "kind": kind, "name": name,
            "uid": format!("trace-{name}"), "controller": true, "blockOwnerDeletion": true}]),
        )
    }
}

/// A trace file and how its rows become pods: what a scenario keeps of a trace workload (the
/// rows themselves are read during the run).
#[derive(Clone, Debug)]
pub struct TraceSource {
    /// The CSV file.
    pub path: PathBuf,
    /// How its rows become pods.
    pub options: ReplayOptions,
}

impl TraceSource {
    /// Opens the file and checks its header.
    pub fn open(&self) -> Result<TraceReader<std::io::BufReader<std::fs::File>>, String> {
        let f = std::fs::File::open(&self.path).map_err(|e| e.to_string())?;
        TraceReader::new(std::io::BufReader::new(f), self.options.clone())
    }
}

const HEADER: &str = "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority";

/// The longest line a trace may have, line break excluded: a row is about a hundred bytes, and
/// a line that never ends must not be read until memory runs out.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// A DNS-1123 name from a trace name.
fn pod_name(raw: &str) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() { c } else { '-' }
        })
        .collect();
    s = s.trim_matches('-').to_string();
    if s.is_empty() {
        s = "pod".into();
    }
    s.truncate(63);
    s
}

/// One row of a trace, as written in the file (before the options apply).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Line number in the file (1 is the header).
    pub line: usize,
    /// `name`.
    pub name: String,
    /// `arrival_s`.
    pub arrival_s: u64,
    /// `duration_s`.
    pub duration_s: u64,
    /// `cpu_milli`.
    pub cpu_milli: u64,
    /// `memory_mib`.
    pub memory_mib: u64,
    /// `gpu`.
    pub gpu: u64,
    /// `gpu_model`, trimmed (empty for any).
    pub gpu_model: String,
    /// `priority`.
    pub priority: i32,
}

impl Row {
    /// Parses line `n`; errors name the line and column.
    fn parse(line: &str, n: usize) -> Result<Row, String> {
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 8 {
            return Err(format!("line {n}: {} columns, expected 8", cols.len()));
        }
        let num = |idx: usize, what: &str| -> Result<u64, String> {
            cols[idx]
                .trim()
                .parse::<u64>()
                .map_err(|e| format!("line {n}: column {what}: {:?}: {e}", cols[idx]))
        };
        Ok(Row {
            line: n,
            name: cols[0].to_string(),
            arrival_s: num(1, "arrival_s")?,
            duration_s: num(2, "duration_s")?,
            cpu_milli: num(3, "cpu_milli")?,
            memory_mib: num(4, "memory_mib")?,
            gpu: num(5, "gpu")?,
            gpu_model: cols[6].trim().to_string(),
            priority: cols[7]
                .trim()
                .parse()
                .map_err(|e| format!("line {n}: column priority: {:?}: {e}", cols[7]))?,
        })
    }
}

impl ReplayOptions {
    /// The pod of a kept row, created at virtual time `at`.
    fn pod(&self, row: &Row, at: SimTime) -> TimedPod {
        let lifetime = ((row.duration_s.saturating_mul(1000)) as f64 * self.time_scale)
            .round()
            .max(1000.0) as SimTime;
        let (cpu, mem, gpu) = (row.cpu_milli, row.memory_mib, row.gpu);
        let mut requests = json!({"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")});
        let mut limits = json!({});
        if gpu > 0 {
            requests[&self.gpu_resource] = json!(gpu.to_string());
            limits[&self.gpu_resource] = json!(gpu.to_string());
        }
        // A ReplicaSet's pods must restart always; a task's never.
        let restart = match self.owner {
            TraceOwner::ReplicaSet(_) => "Always",
            _ => "Never",
        };
        let mut spec = json!({
            "containers": [{"name": "app", "image": "sim/trace", "resources": {"requests": requests, "limits": limits}}],
            "priority": row.priority,
            "restartPolicy": restart,
            "schedulerName": "default-scheduler",
        });
        if let (Some(label), false) = (&self.gpu_model_label, row.gpu_model.is_empty()) {
            spec["nodeSelector"] = json!({label.as_str(): row.gpu_model});
        }
        if !self.tolerations.is_empty() {
            spec["tolerations"] = Value::Array(self.tolerations.clone());
        }
        let mut metadata = json!({"name": pod_name(&row.name), "namespace": self.namespace, "labels": {"trace": "replay"}});
        if let Some(refs) = self.owner.reference() {
            metadata["ownerReferences"] = refs;
        }
        if let Some(safe) = self.safe_to_evict {
            metadata["annotations"] = json!({SAFE_TO_EVICT_ANNOTATION: safe.to_string()});
        }
        TimedPod {
            at,
            object: json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": spec,
                "status": {"phase": "Pending"},
            }),
            lifetime: Some(lifetime),
        }
    }
}

/// Reads a trace's rows one at a time and yields the pods of the kept ones, in file order.
#[derive(Debug)]
pub struct TraceReader<R> {
    src: R,
    options: ReplayOptions,
    /// Lines read so far (the header is line 1).
    line: usize,
    /// Non-blank rows read so far (what sampling counts).
    rows: usize,
    kept: usize,
    /// The arrival and line of the last row read, for the order check.
    last: Option<(u64, usize)>,
    /// No more pods: end of file, the limit, or the horizon reached.
    done: bool,
    buf: String,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader over `src`, whose first line must be the header.
    pub fn new(src: R, options: ReplayOptions) -> Result<TraceReader<R>, String> {
        let mut r = TraceReader {
            src,
            options,
            line: 0,
            rows: 0,
            kept: 0,
            last: None,
            done: false,
            buf: String::new(),
        };
        match r.read_line()? {
            Some(h) if h.trim() == HEADER => Ok(r),
            Some(h) => Err(format!("line 1: header {h:?}, expected {HEADER:?}")),
            None => Err("empty file".into()),
        }
    }

    /// The next line (without its line break), or `None` at the end of the file; a line
    /// longer than [`MAX_LINE_BYTES`] is refused once that much of it is read.
    fn read_line(&mut self) -> Result<Option<&str>, String> {
        use std::io::Read;
        self.buf.clear();
        let most = MAX_LINE_BYTES as u64 + 1;
        let n = (&mut self.src)
            .take(most)
            .read_line(&mut self.buf)
            .map_err(|e| format!("line {}: {e}", self.line + 1))?;
        if n == 0 {
            return Ok(None);
        }
        if n > MAX_LINE_BYTES && !self.buf.ends_with('\n') {
            return Err(format!(
                "line {}: longer than {MAX_LINE_BYTES} bytes",
                self.line + 1
            ));
        }
        self.line += 1;
        Ok(Some(self.buf.trim_end_matches(['\n', '\r'])))
    }

    /// The next non-blank row, checked to arrive no earlier than the one before it.
    fn next_row(&mut self) -> Result<Option<Row>, String> {
        loop {
            let n = self.line + 1;
            let Some(text) = self.read_line()? else {
                return Ok(None);
            };
            if text.trim().is_empty() {
                continue;
            }
            let row = Row::parse(text, n)?;
            if let Some((before, line)) = self.last
                && row.arrival_s < before
            {
                return Err(format!(
                    "line {n}: column arrival_s: {} is before {before} on line {line}: rows must be in arrival order",
                    row.arrival_s
                ));
            }
            self.last = Some((row.arrival_s, n));
            return Ok(Some(row));
        }
    }

    /// The pod of the next kept row, or `None` once no more rows are kept. Rows after the
    /// limit or the horizon are not read.
    pub fn next_pod(&mut self) -> Result<Option<TimedPod>, String> {
        while !self.done {
            let Some(row) = self.next_row()? else {
                self.done = true;
                break;
            };
            let index = self.rows;
            self.rows += 1;
            let o = &self.options;
            if !index.is_multiple_of(o.sample) {
                continue;
            }
            let arrival_ms = row.arrival_s.saturating_mul(1000);
            if arrival_ms < o.start_ms {
                continue;
            }
            let at = ((arrival_ms - o.start_ms) as f64 * o.time_scale).round() as SimTime;
            // Rows come in arrival order: none after this one is kept either.
            if at >= o.horizon_ms || self.kept >= o.limit {
                self.done = true;
                break;
            }
            self.kept += 1;
            return Ok(Some(o.pod(&row, at)));
        }
        Ok(None)
    }
}

/// Every kept pod of a whole CSV text, in file order (what a reader yields). Errors name the
/// line and column.
#[cfg(test)]
pub fn replay(text: &str, o: &ReplayOptions) -> Result<Vec<TimedPod>, String> {
    let mut r = TraceReader::new(text.as_bytes(), o.clone())?;
    let mut out = Vec::new();
    while let Some(p) = r.next_pod()? {
        out.push(p);
    }
    Ok(out)
}

/// The trace pods of a scenario, merged in creation order: one reader per trace, each holding
/// its next pod; of pods created at the same instant, the earlier trace's come first (as a
/// stable sort of all the traces' pods by time would put them).
#[derive(Debug)]
pub struct TraceFeed {
    traces: Vec<(
        PathBuf,
        TraceReader<std::io::BufReader<std::fs::File>>,
        Option<TimedPod>,
    )>,
    /// The trace of the pod [`TraceFeed::next_due`] gave last.
    last: Option<usize>,
}

/// A trace that could not be read during a run.
#[derive(Debug, thiserror::Error)]
#[error("trace {}: {message}", path.display())]
pub struct TraceError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong (naming the line and column).
    pub message: String,
}

impl TraceFeed {
    /// Opens every trace and reads its first kept row.
    pub fn open(sources: &[TraceSource]) -> Result<TraceFeed, TraceError> {
        let mut traces = Vec::new();
        for s in sources {
            let err = |message| TraceError {
                path: s.path.clone(),
                message,
            };
            let mut r = s.open().map_err(err)?;
            let next = r.next_pod().map_err(err)?;
            traces.push((s.path.clone(), r, next));
        }
        Ok(TraceFeed { traces, last: None })
    }

    /// Whether there is no trace at all.
    pub fn is_empty(&self) -> bool {
        self.traces.is_empty()
    }

    /// Takes the earliest pending pod if it is due at or before `t`, reading the next row of
    /// its trace.
    pub fn next_due(&mut self, t: SimTime) -> Result<Option<TimedPod>, TraceError> {
        let mut best: Option<(SimTime, usize)> = None;
        for (i, (_, _, next)) in self.traces.iter().enumerate() {
            if let Some(p) = next
                && p.at <= t
                && best.is_none_or(|(at, _)| p.at < at)
            {
                best = Some((p.at, i));
            }
        }
        let Some((_, i)) = best else {
            return Ok(None);
        };
        self.last = Some(i);
        let (path, reader, next) = &mut self.traces[i];
        let pod = next.take();
        *next = reader.next_pod().map_err(|message| TraceError {
            path: path.clone(),
            message,
        })?;
        Ok(pod)
    }

    /// The file of the trace whose pod [`TraceFeed::next_due`] gave last.
    pub fn last_path(&self) -> Option<&Path> {
        self.last.map(|i| self.traces[i].0.as_path())
    }

    /// When the earliest pending pod is due.
    pub fn peek_at(&self) -> Option<SimTime> {
        self.traces
            .iter()
            .filter_map(|(_, _, p)| p.as_ref().map(|p| p.at))
            .min()
    }
}

/// Checks that a trace can be opened and has the header, before a run starts.
pub fn check(path: &Path, options: &ReplayOptions) -> Result<(), String> {
    TraceSource {
        path: path.to_path_buf(),
        options: options.clone(),
    }
    .open()
    .map(drop)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ReplayOptions {
        ReplayOptions {
            namespace: "default".into(),
            time_scale: 1.0,
            sample: 1,
            start_ms: 0,
            limit: usize::MAX,
            horizon_ms: u64::MAX,
            gpu_resource: "nvidia.com/gpu".into(),
            gpu_model_label: Some("gpu-model".into()),
            tolerations: Vec::new(),
            owner: TraceOwner::None,
            safe_to_evict: None,
        }
    }

    const CSV: &str = "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\n\
        Pod_A,0,100,1500,2048,1,T4,100\n\
        pod-b,10,50,500,512,0,,0\n\
        pod-c,20,5,500,512,0,,50\n";

    /// A line without end (a device, a broken file) is refused once it passes the bound,
    /// naming the line, instead of being read until memory runs out.
    #[test]
    fn a_line_without_end_is_refused() {
        use std::io::Read;
        let endless = std::io::BufReader::new(std::io::repeat(b'a'));
        let e = TraceReader::new(endless, opts()).unwrap_err();
        assert_eq!(e, format!("line 1: longer than {MAX_LINE_BYTES} bytes"));
        let header = format!("{HEADER}\npod-a,0,1,1,1,0,,0\n");
        let rows = header.as_bytes().chain(std::io::repeat(b'7'));
        let mut r = TraceReader::new(std::io::BufReader::new(rows), opts()).unwrap();
        assert!(r.next_pod().unwrap().is_some());
        let e = r.next_pod().unwrap_err();
        assert_eq!(e, format!("line 3: longer than {MAX_LINE_BYTES} bytes"));
        // A line of exactly the bound is read.
        let long = format!("{HEADER}\n{}\n", "x".repeat(MAX_LINE_BYTES));
        let e = replay(&long, &opts()).unwrap_err();
        assert!(e.starts_with("line 2: 1 columns"), "{e}");
    }

    #[test]
    fn rows_become_pods_at_their_arrival() {
        let pods = replay(CSV, &opts()).unwrap();
        assert_eq!(pods.len(), 3);
        assert_eq!(pods[0].object["metadata"]["name"], "pod-a");
        assert_eq!(pods[0].at, 0);
        assert_eq!(pods[0].lifetime, Some(100_000));
        let c = &pods[0].object["spec"]["containers"][0]["resources"];
        assert_eq!(c["requests"]["cpu"], "1500m");
        assert_eq!(c["requests"]["memory"], "2048Mi");
        assert_eq!(c["limits"]["nvidia.com/gpu"], "1");
        assert_eq!(pods[0].object["spec"]["nodeSelector"]["gpu-model"], "T4");
        assert_eq!(pods[1].at, 10_000);
        assert!(pods[1].object["spec"].get("nodeSelector").is_none());
        assert_eq!(pods[2].object["spec"]["priority"], 50);
    }

    #[test]
    fn pods_name_their_owner_and_say_whether_they_are_safe_to_evict() {
        let pods = replay(CSV, &opts()).unwrap();
        let md = &pods[0].object["metadata"];
        assert!(md.get("ownerReferences").is_none() && md.get("annotations").is_none());
        let o = ReplayOptions {
            owner: TraceOwner::Job("batch".into()),
            safe_to_evict: Some(false),
            ..opts()
        };
        let pod = &replay(CSV, &o).unwrap()[0].object;
        let r = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&r["kind"], &r["name"], &r["controller"]),
            (&json!("Job"), &json!("batch"), &json!(true))
        );
        assert_eq!(
            pod["metadata"]["annotations"][SAFE_TO_EVICT_ANNOTATION],
            "false"
        );
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        let o = ReplayOptions {
            owner: TraceOwner::ReplicaSet("vms".into()),
            ..opts()
        };
        let pod = &replay(CSV, &o).unwrap()[0].object;
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["apiVersion"],
            "apps/v1"
        );
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn scaling_sampling_start_and_horizon() {
        let o = ReplayOptions {
            time_scale: 0.5,
            sample: 2,
            ..opts()
        };
        let pods = replay(CSV, &o).unwrap();
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[1].at, 10_000);
        assert_eq!(pods[1].lifetime, Some(2_500));
        let o = ReplayOptions {
            start_ms: 10_000,
            horizon_ms: 10_000,
            ..opts()
        };
        let pods = replay(CSV, &o).unwrap();
        assert_eq!(
            pods.len(),
            1,
            "pod-b at 0, pod-c at 10 s is past the horizon"
        );
        assert_eq!(pods[0].at, 0);
    }

    #[test]
    fn malformed_rows_name_line_and_column() {
        let bad = "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\nx,1,2,three,4,0,,0\n";
        let e = replay(bad, &opts()).unwrap_err();
        assert!(e.starts_with("line 2: column cpu_milli"), "{e}");
        assert!(replay("a,b\n", &opts()).unwrap_err().contains("header"));
    }

    #[test]
    fn a_row_arriving_before_the_one_above_it_is_refused_with_both_lines() {
        let text = format!("{HEADER}\na,10,1,1,1,0,,0\n\nb,5,1,1,1,0,,0\n");
        let e = replay(&text, &opts()).unwrap_err();
        assert_eq!(
            e,
            "line 4: column arrival_s: 5 is before 10 on line 2: rows must be in arrival order"
        );
    }

    /// A source that fails the test if a line past `max_line` is read: it takes a line from
    /// its text only when the one before is consumed.
    struct Guarded<'a> {
        lines: std::str::Lines<'a>,
        read: usize,
        max_line: usize,
        current: Vec<u8>,
        pos: usize,
    }

    impl std::io::Read for Guarded<'_> {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            unreachable!("read through BufRead only")
        }
    }

    impl BufRead for Guarded<'_> {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if self.pos == self.current.len() {
                let Some(l) = self.lines.next() else {
                    return Ok(&[]);
                };
                self.read += 1;
                assert!(self.read <= self.max_line, "line {} read", self.read);
                self.current = format!("{l}\n").into_bytes();
                self.pos = 0;
            }
            Ok(&self.current[self.pos..])
        }
        fn consume(&mut self, n: usize) {
            self.pos += n;
        }
    }

    #[test]
    fn rows_are_read_one_at_a_time_and_not_past_the_horizon() {
        // Line 5 is malformed but past the horizon: never read, so never an error.
        let text = format!("{CSV}pod-d,30,1,1,1,0,,0\nnot a row\n");
        let src = Guarded {
            lines: text.lines(),
            read: 0,
            max_line: 5,
            current: Vec::new(),
            pos: 0,
        };
        let o = ReplayOptions {
            horizon_ms: 30_000,
            ..opts()
        };
        let mut r = TraceReader::new(src, o).unwrap();
        assert_eq!(r.src.read, 1, "the header only");
        let first = r.next_pod().unwrap().unwrap();
        assert_eq!((first.at, r.src.read), (0, 2));
        assert_eq!(r.next_pod().unwrap().unwrap().at, 10_000);
        assert_eq!(r.next_pod().unwrap().unwrap().at, 20_000);
        assert_eq!(r.src.read, 4);
        assert!(r.next_pod().unwrap().is_none(), "pod-d is at the horizon");
        assert!(r.next_pod().unwrap().is_none());
        assert_eq!(r.src.read, 5);
    }

    #[test]
    fn the_feed_merges_traces_by_time_the_first_trace_first_on_ties() {
        let dir = std::env::temp_dir().join(format!("trace-feed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, rows: &str| {
            let path = dir.join(name);
            std::fs::write(&path, format!("{HEADER}\n{rows}")).unwrap();
            TraceSource {
                path,
                options: opts(),
            }
        };
        let one = write("one.csv", "a1,0,1,1,1,0,,0\na2,20,1,1,1,0,,0\n");
        let two = write(
            "two.csv",
            "b1,0,1,1,1,0,,0\nb2,10,1,1,1,0,,0\nb3,20,1,1,1,0,,0\nbad,30,x,1,1,0,,0\n",
        );
        let mut feed = TraceFeed::open(&[one, two]).unwrap();
        let mut take = |t: SimTime| {
            let p = feed.next_due(t).unwrap();
            p.map(|p| p.object["metadata"]["name"].as_str().unwrap().to_string())
        };
        assert_eq!(
            take(0).as_deref(),
            Some("a1"),
            "the first trace first on a tie"
        );
        assert_eq!(take(0).as_deref(), Some("b1"));
        assert_eq!(take(0), None, "b2 at 10 s, a2 at 20 s");
        assert_eq!(take(15_000).as_deref(), Some("b2"));
        assert_eq!(take(15_000), None);
        assert_eq!(take(20_000).as_deref(), Some("a2"), "before b3 on the tie");
        // Taking b3 reads the row after it, which is malformed.
        let e = feed.next_due(20_000).expect_err("the malformed row");
        assert!(e.to_string().starts_with("trace "), "{e}");
        assert!(
            e.to_string().ends_with(
                "two.csv: line 5: column duration_s: \"x\": invalid digit found in string"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
