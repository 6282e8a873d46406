//! `braid status --shares`: each share's provisioned performance and what
//! it uses now (`/api/v1/shares`, its `"qos"` objects).

use serde_json::Value;

fn num(v: &Value, digits: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// One line per share: limits, current use, credits and why it was held
/// back in the last minute.
pub fn render_shares(v: &Value) -> String {
    let empty = Vec::new();
    let shares = v["shares"].as_array().unwrap_or(&empty);
    if shares.is_empty() {
        return "no shares\n".into();
    }
    let headers = [
        "SHARE",
        "QOS",
        "IOPS",
        "BURST",
        "IN MiB/s",
        "OUT MiB/s",
        "NOW IOPS",
        "NOW R/W MiB/s",
        "CREDITS",
        "TO EMPTY",
        "TO FULL",
        "THROTTLED",
        "LAST MINUTE",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in shares {
        let q = &s["qos"];
        let enabled = q["enabled"].as_bool().unwrap_or(false);
        let reasons: Vec<String> = ["iops", "ingress", "egress", "metadata", "file"]
            .iter()
            .filter_map(|r| {
                let f = q["throttled_fraction"][r].as_f64().unwrap_or(0.0);
                (f > 0.0).then(|| format!("{r} {:.0}%", f * 100.0))
            })
            .collect();
        rows.push(vec![
            s["name"].as_str().unwrap_or("?").to_string(),
            if enabled { "on" } else { "off" }.into(),
            num(&q["iops"], 0),
            num(&q["burst_iops"], 0),
            num(&q["ingress_mibps"], 1),
            num(&q["egress_mibps"], 1),
            num(&q["current_iops"], 0),
            format!(
                "{}/{}",
                num(&q["current_read_mibps"], 1),
                num(&q["current_write_mibps"], 1)
            ),
            format!(
                "{}/{}",
                num(&q["credits"], 0),
                num(&q["credit_capacity"], 0)
            ),
            num(&q["seconds_to_empty"], 0),
            num(&q["seconds_to_full"], 0),
            if q["throttled"].as_bool().unwrap_or(false) {
                "yes"
            } else {
                "no"
            }
            .into(),
            if reasons.is_empty() {
                "-".into()
            } else {
                reasons.join(", ")
            },
        ]);
    }
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let mut l = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        l.truncate(l.trim_end().len());
        l + "\n"
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out += &line(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_table() {
        let v: Value = serde_json::from_str(
            r#"{"shares": [
              {"name": "data", "qos": {"enabled": true, "iops": 500, "burst_iops": 1500,
               "credits": 1200.4, "credit_capacity": 3600000.0, "seconds_to_empty": 12.3,
               "seconds_to_full": null, "ingress_mibps": 20.0, "egress_mibps": null,
               "current_iops": 612.0, "current_read_mibps": 2.4, "current_write_mibps": 0.0,
               "throttled": true, "throttled_fraction": {"iops": 0.5, "ingress": 0.0,
               "egress": 0.0, "metadata": 0.0, "file": 0.05}}},
              {"name": "free", "qos": {"enabled": false, "iops": null, "burst_iops": null,
               "credits": 0.0, "credit_capacity": 0.0, "seconds_to_empty": null,
               "seconds_to_full": null, "ingress_mibps": null, "egress_mibps": null,
               "current_iops": 0.0, "current_read_mibps": 0.0, "current_write_mibps": 0.0,
               "throttled": false, "throttled_fraction": {"iops": 0.0, "ingress": 0.0,
               "egress": 0.0, "metadata": 0.0, "file": 0.0}}}]}"#,
        )
        .unwrap();
        let t = render_shares(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("SHARE"));
        let data: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(&data[..4], ["data", "on", "500", "1500"], "{t}");
        assert!(
            lines[1].contains("1200/3600000") && lines[1].contains("iops 50%, file 5%"),
            "{t}"
        );
        assert!(lines[1].contains(" 12 ") && lines[1].contains("yes"), "{t}");
        assert!(
            lines[2].starts_with("free") && lines[2].contains("off"),
            "{t}"
        );
    }
}
