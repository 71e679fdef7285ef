//! The write API of the status page (behind its credentials): silences
//! (`/api/silences`) and templates marked known
//! (`/api/templates/ID/known`), the answers `sigwatch silence` and
//! `sigwatch templates --known` read.

use super::Telemetry;

/// An answer of `/api/silences`: `f`'s JSON, or the error with its status
/// (400 a bad silence, 404 an unknown id, 409 the store full, 500 the file,
/// 404 when this instance keeps no silences).
pub(super) fn silences_answer(
    t: &Telemetry,
    f: impl FnOnce(
        &crate::silence::SilenceBook,
        i64,
    ) -> Result<serde_json::Value, crate::silence::SilenceError>,
) -> axum::response::Response {
    use crate::silence::SilenceError as E;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let json = [
        ("content-type", "application/json"),
        ("cache-control", "no-store"),
    ];
    let Some(book) = t.silences() else {
        return (StatusCode::NOT_FOUND, "this instance keeps no silences\n").into_response();
    };
    match f(&book, crate::clock::wall_ns()) {
        Ok(v) => (StatusCode::OK, json, v.to_string()).into_response(),
        Err(e) => {
            let code = match e {
                E::Invalid(_) => StatusCode::BAD_REQUEST,
                E::Unknown(_) => StatusCode::NOT_FOUND,
                E::Full => StatusCode::CONFLICT,
                E::File { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let body = serde_json::json!({ "error": e.to_string() }).to_string();
            (code, json, body).into_response()
        }
    }
}

/// The answer of `POST /api/templates/ID/known` (`ID` or `template-ID`).
pub(super) async fn known_answer(t: &Telemetry, id: &str) -> axum::response::Response {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let json = [
        ("content-type", "application/json"),
        ("cache-control", "no-store"),
    ];
    let err = |code: StatusCode, msg: String| {
        (code, json, serde_json::json!({ "error": msg }).to_string()).into_response()
    };
    let Ok(n) = id.trim_start_matches("template-").parse::<u64>() else {
        return err(
            StatusCode::BAD_REQUEST,
            format!("{id:?} is not a template id (42 or template-42)"),
        );
    };
    match t.ask_known(n).await {
        Ok(Some(text)) => (
            StatusCode::OK,
            json,
            serde_json::json!({ "id": format!("template-{n}"), "template": text, "known": true })
                .to_string(),
        )
            .into_response(),
        Ok(None) => err(
            StatusCode::NOT_FOUND,
            format!("no template {n} (novelty off, or not mined by this instance)"),
        ),
        Err(()) => err(
            StatusCode::SERVICE_UNAVAILABLE,
            "the detection loop did not answer within 5 s; try again".into(),
        ),
    }
}
