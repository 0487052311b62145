//! Reads a topic from a chosen position with a Reader (no group, nothing
//! committed): prints what is there, then follows new messages for a few
//! seconds.
//!
//! ```sh
//! cargo run -p magnetar-client --example reader -- 127.0.0.1:9092 my-topic earliest
//! cargo run -p magnetar-client --example reader -- 127.0.0.1:9092 my-topic 0:100     # partition 0 from offset 100
//! cargo run -p magnetar-client --example reader -- 127.0.0.1:9092 my-topic @1700000000000
//! ```

use std::time::Duration;

use magnetar_client::{Reader, StartPosition};

fn parse_start(s: &str) -> magnetar_client::Result<StartPosition> {
    let bad = || magnetar_client::Error::InvalidArgument(format!("start {s:?}"));
    Ok(match s {
        "earliest" => StartPosition::Earliest,
        "latest" => StartPosition::Latest,
        _ if s.starts_with('@') => StartPosition::Timestamp(s[1..].parse().map_err(|_| bad())?),
        _ => {
            let (p, o) = s.split_once(':').ok_or_else(bad)?;
            StartPosition::Offset(p.parse().map_err(|_| bad())?, o.parse().map_err(|_| bad())?)
        }
    })
}

#[tokio::main]
async fn main() -> magnetar_client::Result<()> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let topic = args.next().unwrap_or_else(|| "example".into());
    let start = parse_start(&args.next().unwrap_or_else(|| "earliest".into()))?;

    let mut reader = Reader::builder(topic)
        .bootstrap(&bootstrap)
        .start(start)
        .start_inclusive(true)
        .build()
        .await?;
    let mut n = 0;
    while reader.has_message_available().await? {
        let m = reader.read_next().await?;
        println!(
            "{} ts={} {:?}",
            m.id(),
            m.timestamp(),
            m.value().map(String::from_utf8_lossy)
        );
        n += 1;
    }
    eprintln!("{n} messages were there; following for 5 s");
    while let Some(m) = reader.read_next_timeout(Duration::from_secs(5)).await? {
        println!(
            "{} ts={} {:?}",
            m.id(),
            m.timestamp(),
            m.value().map(String::from_utf8_lossy)
        );
    }
    Ok(())
}
