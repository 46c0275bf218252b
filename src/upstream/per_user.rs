//! Calls of a per-user upstream (`oauth.grant = "user"`): each goes out with the caller's own
//! token at the upstream, from the vault, over a connection of its own. A caller who has not
//! connected that account is asked to (URL-mode elicitation, spec §6): in 2025-11-25 the
//! `-32042` error listing the connect link; in 2026-07-28 an `input_required` result whose
//! request is the link (the retry runs the tool once the account is connected, and a declined
//! request ends the call); a client that cannot open URLs is told where to connect by hand.
//! The caller's MCP token never goes upstream, and the upstream's tokens never reach the client.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Link;
use super::credentials::Minted;
use super::peer::Peer;
use crate::protocol::{CallToolResult, Era};
use crate::tool::{InputRequest, ToolContext, ToolError, ToolOutcome};
use crate::vault::{UpstreamAuthorization, Vault};

pub(super) async fn connection(
    link: &Arc<Link>,
    per_user: &(Arc<Vault>, Arc<UpstreamAuthorization>),
    ctx: &ToolContext,
) -> Result<Arc<Peer>, ToolOutcome> {
    let (vault, _) = per_user;
    let said = |why: String| Err(Ok(CallToolResult::error(why)));
    let Some(principal) = ctx.principal() else {
        return said(format!(
            "The upstream MCP server {} runs each call with the caller's own account, and this request names no user (is auth off?).",
            link.name
        ));
    };
    let key = principal.key();
    let access = match vault.access(&key, &link.name).await {
        Ok(Some(access)) => access,
        Ok(None) => return Err(ask_to_connect(link, vault, &key, ctx).await),
        Err(e) => return said(format!("The upstream MCP server {} cannot be called as you right now: {e}", link.name)),
    };
    let Some(users) = &link.users else { return said("internal: no per-user connections".into()) };
    let left = Duration::from_millis(u64::try_from(access.expires_ms - crate::authserver::now_ms()).unwrap_or(0));
    super::users::peer_with(link, users, Minted::new(access.token.clone(), Some(left)))
        .await
        .map_err(|e| Ok(CallToolResult::error(format!("The upstream MCP server {} could not be reached as you: {e}", link.name))))
}

/// The answer of a call whose user has not connected the upstream.
async fn ask_to_connect(link: &Link, vault: &Vault, principal: &str, ctx: &ToolContext) -> ToolOutcome {
    let upstream = &link.name;
    let key = format!("connect_{upstream}");
    let tool = ctx.tool_name();
    if let Some(answer) = ctx.input_response(&key)
        && matches!(answer.get("action").and_then(Value::as_str), Some("decline" | "cancel"))
    {
        return Ok(CallToolResult::error(format!("You did not connect your account at {upstream}, so {tool} did not run.")));
    }
    if !ctx.client_caps().elicitation_url {
        return Ok(CallToolResult::error(format!(
            "{tool} works with your own account at {upstream}, which you have not connected. Open {} in your browser, connect {upstream}, then call {tool} again.",
            vault.connections_url()
        )));
    }
    let link = match vault.connect_link(principal, upstream).await {
        Ok(link) => link,
        Err(e) => return Ok(CallToolResult::error(format!("{tool} needs your account at {upstream} connected, and {e}"))),
    };
    let message = format!("{tool} works with your own account at {upstream}. Connect it in your browser; then the call goes on.");
    if ctx.protocol_version().era() == Era::Modern {
        let params = json!({ "mode": "url", "message": message, "url": link.url });
        // Signed and bound to this tool and endpoint by the server: the retry's state says
        // which connect it answers.
        ctx.set_request_state(json!({ "connect": upstream }));
        return Err(ctx.ask_again(InputRequest::elicit(key, params)));
    }
    let elicitation = json!({ "mode": "url", "elicitationId": link.elicitation_id, "url": link.url, "message": message });
    Err(ToolError::UrlElicitationRequired {
        message: format!("{tool} needs your account at {upstream} connected first"),
        elicitations: json!([elicitation]),
    })
}
