//! Percentiles of one size's samples, and the table and JSON that report them.

/// The figures `alkaid latency` prints and writes to JSON.
#[derive(Clone, Copy, Default, Debug)]
pub struct Summary {
    pub samples: u64,
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub p999_ns: i64,
    pub max_ns: i64,
    pub mean_ns: f64,
}

/// Percentiles by nearest rank, the definition of Histogram::ValueAtPercentile
/// (measure/src/histogram.cc): the value of 1-based rank
/// ceil(p / 100 * n), clamped to 1..n, in the sorted samples; p >= 100 is the
/// maximum. The C++ histogram reports the midpoint of the sample's bucket
/// (within 0.05% above 2048 ns, exact below); here the sample itself, since the
/// whole sorted list is at hand.
pub fn summarize(samples: &mut [i64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    samples.sort_unstable();
    let n = samples.len();
    let at = |p: f64| -> i64 {
        if p >= 100.0 {
            return samples[n - 1];
        }
        let rank = (p / 100.0 * n as f64).ceil() as usize;
        samples[rank.clamp(1, n) - 1]
    };
    let sum: f64 = samples.iter().map(|v| *v as f64).sum();
    Summary {
        samples: n as u64,
        p50_ns: at(50.0),
        p90_ns: at(90.0),
        p99_ns: at(99.0),
        p999_ns: at(99.9),
        max_ns: samples[n - 1],
        mean_ns: sum / n as f64,
    }
}

/// One size's result, as one entry of the JSON "results".
pub struct Measurement {
    pub payload_bytes: i64,
    pub summary: Summary,
    pub msgs_per_s: f64,
}

pub fn table_header(block: bool) -> String {
    format!(
        "iceoryx2 ping-pong, mode {}; one-way latency = round trip / 2\n{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        if block { "block" } else { "spin" },
        "payload",
        "p50_ns",
        "p90_ns",
        "p99_ns",
        "p99.9_ns",
        "max_ns",
        "samples"
    )
}

pub fn table_row(m: &Measurement) -> String {
    let s = &m.summary;
    format!(
        "{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        m.payload_bytes, s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.max_ns, s.samples
    )
}

/// The document `alkaid latency --json` writes (transport "iceoryx2"), with
/// the "wait" key of the iceoryx 2.0 peer. Written by hand: flat numbers and
/// fixed strings need no JSON library.
pub fn to_json(results: &[Measurement], block: bool, pinned_cpus: &[usize]) -> String {
    let entries: Vec<String> = results
        .iter()
        .map(|m| {
            let s = &m.summary;
            format!(
                concat!(
                    "    {{\n",
                    "      \"transport\": \"iceoryx2\",\n",
                    "      \"mode\": \"{mode}\",\n",
                    "      \"wait\": \"{wait}\",\n",
                    "      \"pattern\": \"pingpong\",\n",
                    "      \"payload_bytes\": {bytes},\n",
                    "      \"consumers\": 1,\n",
                    "      \"samples\": {samples},\n",
                    "      \"p50_ns\": {p50},\n",
                    "      \"p90_ns\": {p90},\n",
                    "      \"p99_ns\": {p99},\n",
                    "      \"p999_ns\": {p999},\n",
                    "      \"max_ns\": {max},\n",
                    "      \"mean_ns\": {mean},\n",
                    "      \"msgs_per_s\": {rate}\n",
                    "    }}"
                ),
                mode = if block { "block" } else { "spin" },
                wait = if block { "listener" } else { "busy-poll" },
                bytes = m.payload_bytes,
                samples = s.samples,
                p50 = s.p50_ns,
                p90 = s.p90_ns,
                p99 = s.p99_ns,
                p999 = s.p999_ns,
                max = s.max_ns,
                mean = json_number(s.mean_ns),
                rate = json_number(m.msgs_per_s),
            )
        })
        .collect();
    let mut load = [0f64; 3];
    // SAFETY: getloadavg writes at most 3 doubles into the array it is given.
    let got = unsafe { libc::getloadavg(load.as_mut_ptr(), 3) };
    if got < 3 {
        load = [0.0; 3];
    }
    // SAFETY: sysconf only reads its argument.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let pinned: Vec<String> = pinned_cpus.iter().map(usize::to_string).collect();
    format!(
        "{{\n  \"results\": [\n{}\n  ],\n  \"host\": {{\n    \"cpus_online\": {},\n    \"pinned_cpus\": [{}],\n    \"loadavg\": [{}, {}, {}]\n  }}\n}}\n",
        entries.join(",\n"),
        cpus,
        pinned.join(", "),
        json_number(load[0]),
        json_number(load[1]),
        json_number(load[2]),
    )
}

/// A finite f64 as JSON (Rust prints 12.0 as "12", which JSON accepts; NaN
/// and infinities, which it does not, as 0).
fn json_number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "0".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut v: Vec<i64> = (1..=1000).rev().collect();
        let s = summarize(&mut v);
        assert_eq!(s.samples, 1000);
        assert_eq!(s.p50_ns, 500);
        assert_eq!(s.p90_ns, 900);
        assert_eq!(s.p99_ns, 990);
        // The C++'s double arithmetic, kept on purpose: 99.9 / 100 * 1000 is
        // just above 999, so the rank is 1000 there too.
        assert_eq!(s.p999_ns, 1000);
        assert_eq!(s.max_ns, 1000);
        // Three samples: rank ceil(1.5) = 2 for p50, ceil(2.97) = 3 for p99.
        let s = summarize(&mut [30, 10, 20]);
        assert_eq!((s.p50_ns, s.p99_ns), (20, 30));
        assert_eq!(summarize(&mut []).samples, 0);
    }
}
