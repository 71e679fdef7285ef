//! Loki's series API (`/loki/api/v1/series`): the streams a selector
//! matches over a time range, as label sets, without reading a line. A
//! shard asks it which streams exist before it asks for lines, so it can
//! name only its own. Sent as a POST form, as Loki's documentation advises
//! for long selectors.

use super::selector::{labels_of, Labels};
use super::{LokiConfig, LokiError};
use std::collections::BTreeMap;

#[derive(serde::Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Vec<BTreeMap<String, String>>,
}

/// Parses a series answer into label sets, sorted and without repeats.
pub fn parse(body: &str) -> Result<Vec<Labels>, LokiError> {
    let a: Answer = serde_json::from_str(body).map_err(|e| LokiError::Parse(e.to_string()))?;
    if a.status != "success" {
        return Err(LokiError::Parse(format!("status {:?}", a.status)));
    }
    let mut out: Vec<Labels> = a.data.into_iter().map(labels_of).collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// The streams `selector` matches with entries in `[start, end]` (ns),
/// counted under `meter` on /metrics.
pub async fn series(
    client: &reqwest::Client,
    cfg: &LokiConfig,
    selector: &str,
    start: i64,
    end: i64,
    meter: &str,
) -> Result<Vec<Labels>, LokiError> {
    let url = format!("{}/loki/api/v1/series", cfg.url);
    let req = client.post(&url).form(&[
        ("match[]", selector),
        ("start", &start.to_string()),
        ("end", &end.to_string()),
    ]);
    let body = super::send(super::authorize(req, cfg)).await?;
    let streams = parse(&body)?;
    super::meter::with(meter, |m| {
        m.requests += 1;
        m.bytes += body.len() as u64;
        m.series_refreshes += 1;
    });
    Ok(streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_answers_become_sorted_label_sets() {
        // The shape of Loki's documented answer.
        let body = r#"{"status":"success","data":[
            {"pod":"b","namespace":"media"},
            {"namespace":"media","pod":"a","container":"egress"},
            {"pod":"b","namespace":"media"}]}"#;
        let s = parse(body).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0],
            vec![
                ("container".to_string(), "egress".to_string()),
                ("namespace".into(), "media".into()),
                ("pod".into(), "a".into())
            ]
        );
        assert!(parse(r#"{"status":"error","data":[]}"#).is_err());
        assert!(parse("not json").is_err());
        assert_eq!(
            parse(r#"{"status":"success"}"#).unwrap(),
            Vec::<Labels>::new()
        );
    }
}
