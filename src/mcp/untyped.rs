//! What a request the SDK could not type is answered. rmcp reads a request of a method it
//! knows but with params of the wrong shape (`"arguments": "x"`) as a custom request, and
//! answers every custom request "method not found" (-32601). JSON-RPC calls that "invalid
//! params" (-32602): a method this server serves gets that, with what was wrong.

use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, ConstString, CustomRequest, DiscoverRequest,
    DiscoverRequestMethod, ErrorCode, InitializeRequest, InitializeResultMethod, ListToolsRequest,
    ListToolsRequestMethod, PingRequest, PingRequestMethod,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The error for a request rmcp left untyped.
pub fn refusal(request: &CustomRequest) -> ErrorData {
    let method = request.method.as_str();
    let typed = json!({"method": method, "params": request.params});
    let why = match method {
        CallToolRequestMethod::VALUE => why_not::<CallToolRequest>(typed),
        ListToolsRequestMethod::VALUE => why_not::<ListToolsRequest>(typed),
        InitializeResultMethod::VALUE => why_not::<InitializeRequest>(typed),
        DiscoverRequestMethod::VALUE => why_not::<DiscoverRequest>(typed),
        PingRequestMethod::VALUE => why_not::<PingRequest>(typed),
        _ => {
            return ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "method not found: {method} is not served here (tools/list and tools/call are)"
                ),
                None,
            );
        }
    };
    ErrorData::invalid_params(
        format!(
            "invalid params for {method}: {}",
            why.unwrap_or_else(|| "not of the shape the method takes".into())
        ),
        None,
    )
}

/// What serde says is wrong with `request` as a `T`.
fn why_not<T: DeserializeOwned>(request: Value) -> Option<String> {
    serde_json::from_value::<T>(request)
        .err()
        .map(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(method: &str, params: Value) -> ErrorData {
        refusal(&CustomRequest::new(method, Some(params)))
    }

    #[test]
    fn a_served_method_with_params_of_the_wrong_shape_is_invalid_params() {
        let error = refused("tools/call", json!({"name": "list", "arguments": "x"}));
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(
            error.message.starts_with("invalid params for tools/call: "),
            "{}",
            error.message
        );
        assert!(error.message.contains("string \"x\""), "{}", error.message);
        let error = refused("tools/call", json!(3));
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{}", error.message);
    }

    #[test]
    fn a_method_not_served_is_method_not_found() {
        let error = refused("prompts/everything", json!({}));
        assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(
            error.message.contains("prompts/everything"),
            "{}",
            error.message
        );
    }
}
