//! The command line, the same as alkaid_iceoryx_latency's (bench/peers/iceoryx_latency.cc)
//! less its RouDi options, plus the hidden arguments of the pong process.

pub const USAGE: &str = "\
alkaid_iceoryx2_latency [--sizes 64,4096,...] [--count N] [--duration SEC]
                        [--mode spin|block] [--json FILE|-] [--no-pin]";

/// The largest payload: the same bound as the other peers and `alkaid latency`.
pub const MAX_SIZE: i64 = 16 << 20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    /// The process the user started: times the round trips and reports.
    Ping,
    /// The process the ping side starts (`--role pong`): answers each ping.
    Pong,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub sizes: Vec<i64>,
    pub count: i64,
    /// Seconds per size at most; 0: no limit.
    pub duration: f64,
    /// Sleep on an iceoryx2 event between samples instead of busy-polling.
    pub block: bool,
    /// Where the JSON goes: a file, "-" for stdout, or nowhere.
    pub json: Option<String>,
    pub pin: bool,
    pub role: Role,
    /// Names this run's services, so that two runs on one machine do not meet;
    /// the ping side's pid.
    pub run_id: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sizes: vec![64, 4096, 65536, 1048576, 16777216],
            count: 10000,
            duration: 10.0,
            block: false,
            json: None,
            pin: true,
            role: Role::Ping,
            run_id: std::process::id(),
        }
    }
}

/// What the command line asks for: a run, or the usage text.
pub enum Parsed {
    Run(Options),
    Help,
}

pub fn parse(args: &[String]) -> Result<Parsed, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--sizes" => o.sizes = parse_sizes(&value()?)?,
            "--count" => {
                let text = value()?;
                o.count = text
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("--count {text}: want a whole number >= 1"))?;
            }
            "--duration" => {
                let text = value()?;
                o.duration = text
                    .parse()
                    .ok()
                    .filter(|d: &f64| d.is_finite() && *d >= 0.0)
                    .ok_or_else(|| format!("--duration {text}: want seconds >= 0"))?;
            }
            "--mode" => {
                o.block = match value()?.as_str() {
                    "spin" => false,
                    "block" => true,
                    other => return Err(format!("--mode {other}: want spin or block")),
                }
            }
            "--json" => o.json = Some(value()?),
            "--no-pin" => o.pin = false,
            "--role" => {
                o.role = match value()?.as_str() {
                    "ping" => Role::Ping,
                    "pong" => Role::Pong,
                    other => return Err(format!("--role {other}: want ping or pong")),
                }
            }
            "--run-id" => {
                let text = value()?;
                o.run_id = text
                    .parse()
                    .map_err(|_| format!("--run-id {text}: want a pid"))?;
            }
            "--help" | "-h" => return Ok(Parsed::Help),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Parsed::Run(o))
}

fn parse_sizes(list: &str) -> Result<Vec<i64>, String> {
    let sizes = list
        .split(',')
        .map(|item| match item.trim().parse::<i64>() {
            Ok(size) if (1..=MAX_SIZE).contains(&size) => Ok(size),
            _ => Err(format!("size {item} outside 1 B .. 16 MiB")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(sizes)
}

/// The arguments that make this binary the pong side of `o`'s run. No
/// count or duration: the ping side ends each size with a marker.
pub fn pong_args(o: &Options) -> Vec<String> {
    let sizes: Vec<String> = o.sizes.iter().map(i64::to_string).collect();
    let mut args = vec![
        "--role".to_string(),
        "pong".to_string(),
        "--run-id".to_string(),
        o.run_id.to_string(),
        "--sizes".to_string(),
        sizes.join(","),
        "--mode".to_string(),
        if o.block { "block" } else { "spin" }.to_string(),
    ];
    if !o.pin {
        args.push("--no-pin".to_string());
    }
    args
}

/// Values in a payload of `size` bytes: whole int64s, at least one, as the
/// iceoryx 2.0 peer does (a size that is not a multiple of 8 loses its tail).
pub fn rows_of(size: i64) -> usize {
    if size < 8 { 1 } else { (size / 8) as usize }
}
