use super::BizError;

/// The formats of `kubectl get -o`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    Json,
    Yaml,
}

impl OutputFormat {
    /// Absent means json, as in the original k8sailor.
    pub fn parse(s: Option<&str>) -> Result<Self, BizError> {
        match s.unwrap_or("json") {
            "json" | "" => Ok(OutputFormat::Json),
            "yaml" => Ok(OutputFormat::Yaml),
            other => Err(BizError::OutputFormat(other.to_string())),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            OutputFormat::Json => "application/json",
            OutputFormat::Yaml => "application/yaml",
        }
    }

    /// kubectl prints the object as an unstructured map: keys sorted, JSON indented by four
    /// spaces. `serde_json::Value` keeps keys sorted, which gives the same order.
    pub fn render(self, raw: &[u8]) -> Result<String, BizError> {
        let value: serde_json::Value = serde_json::from_slice(raw)
            .map_err(|e| BizError::Internal(format!("cached object is not JSON: {e}")))?;
        match self {
            OutputFormat::Json => {
                let mut out = Vec::with_capacity(raw.len() * 2);
                let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
                serde::Serialize::serialize(&value, &mut ser)
                    .map_err(|e| BizError::Internal(e.to_string()))?;
                out.push(b'\n');
                String::from_utf8(out).map_err(|e| BizError::Internal(e.to_string()))
            }
            OutputFormat::Yaml => {
                serde_saphyr::to_string(&value).map_err(|e| BizError::Internal(e.to_string()))
            }
        }
    }
}
