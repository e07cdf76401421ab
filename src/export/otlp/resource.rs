//! The resource every span and log record is sent under, and the `k=v,k2=v2` lists the
//! OpenTelemetry variables are written in (`OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_EXPORTER_OTLP_HEADERS`).

use opentelemetry_proto::tonic::resource::v1::Resource;

use super::span::{attribute, string};

/// `service.name` (`tether`, or `OTEL_SERVICE_NAME`), `service.version`, `host.name` and
/// `user.name`, then what `OTEL_RESOURCE_ATTRIBUTES` adds or replaces (`OTEL_SERVICE_NAME`
/// still wins for `service.name`, as the specification has it). `env` looks a variable up.
pub fn resource(
    host: &str,
    user: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Resource, String> {
    let mut pairs: Vec<(String, String)> = vec![
        ("service.name".into(), "tether".into()),
        ("service.version".into(), env!("CARGO_PKG_VERSION").into()),
    ];
    for (key, value) in [("host.name", host), ("user.name", user)] {
        if !value.is_empty() {
            pairs.push((key.into(), value.into()));
        }
    }
    let set = |pairs: &mut Vec<(String, String)>, key: String, value: String| match pairs
        .iter_mut()
        .find(|(k, _)| *k == key)
    {
        Some(pair) => pair.1 = value,
        None => pairs.push((key, value)),
    };
    const ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
    if let Some(text) = env(ATTRIBUTES) {
        for (key, value) in key_values(&text).map_err(|e| format!("{ATTRIBUTES}: {e}"))? {
            set(&mut pairs, key, value);
        }
    }
    if let Some(name) = env("OTEL_SERVICE_NAME").filter(|n| !n.trim().is_empty()) {
        set(&mut pairs, "service.name".into(), name.trim().into());
    }
    Ok(Resource {
        attributes: (pairs.iter())
            .map(|(key, value)| attribute(key, string(value)))
            .collect(),
        ..Default::default()
    })
}

/// A `key=value,key2=value2` list: keys and values trimmed and percent-decoded (`%2C` is a
/// comma), empty entries skipped. An entry without `=` or with an empty key is an error that
/// quotes it.
pub fn key_values(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    // An entry is not quoted back: a header's value may be a credential.
    for (n, entry) in (text.split(',').filter(|e| !e.trim().is_empty())).enumerate() {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(format!(
                "entry {} is not key=value (not shown: it may hold a secret)",
                n + 1
            ));
        };
        let key = percent_decode(key.trim());
        if key.is_empty() {
            return Err(format!("entry {} has no key before its =", n + 1));
        }
        pairs.push((key, percent_decode(value.trim())));
    }
    Ok(pairs)
}

/// `%XX` as the byte it stands for; a `%` not followed by two hex digits stays as it is.
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;

    fn attributes(resource: &Resource) -> Vec<(String, String)> {
        (resource.attributes.iter())
            .map(|kv| {
                let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(Value::StringValue(s)) => s.clone(),
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), value)
            })
            .collect()
    }

    #[test]
    fn lists_are_trimmed_and_percent_decoded() {
        assert_eq!(
            key_values(" a = 1 ,b=x%2Cy%3Dz,, c=%E2%9C%93 ,d=100%").unwrap(),
            [
                ("a".to_string(), "1".to_string()),
                ("b".into(), "x,y=z".into()),
                ("c".into(), "✓".into()),
                ("d".into(), "100%".into())
            ]
        );
        assert_eq!(key_values("").unwrap(), []);
        let oops = key_values("a=1,Authorization: Bearer sk-1").unwrap_err();
        assert!(oops.starts_with("entry 2 is not key=value"), "{oops}");
        assert!(!oops.contains("sk-1"), "a credential quoted back: {oops}");
        assert!(key_values("=1").unwrap_err().contains("no key"));
    }

    #[test]
    fn a_percent_without_two_hex_digits_stays() {
        assert_eq!(percent_decode("a%+Ab%-1c%2"), "a%+Ab%-1c%2");
    }

    #[test]
    fn the_resource_takes_the_variables_over_its_defaults() {
        let env = |name: &str| match name {
            "OTEL_RESOURCE_ATTRIBUTES" => {
                Some("deployment.environment=ci,host.name=vm-7,service.name=x".into())
            }
            "OTEL_SERVICE_NAME" => Some("agents".into()),
            _ => None,
        };
        let set = attributes(&resource("box", "dev", env).unwrap());
        let get = |key: &str| set.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        assert_eq!(get("service.name"), Some("agents"));
        assert_eq!(get("host.name"), Some("vm-7"));
        assert_eq!(get("user.name"), Some("dev"));
        assert_eq!(get("deployment.environment"), Some("ci"));
        assert_eq!(get("service.version"), Some(env!("CARGO_PKG_VERSION")));
        let plain = attributes(&resource("box", "dev", |_| None).unwrap());
        assert_eq!(plain[0], ("service.name".into(), "tether".into()));
        let bad = resource("box", "dev", |_| Some("nonsense".into())).unwrap_err();
        assert!(bad.starts_with("OTEL_RESOURCE_ATTRIBUTES: "), "{bad}");
    }
}
