//! The page's static files, compiled into the binary (`include_str!`/`include_bytes!` of
//! `console/assets/`): one HTML shell, one stylesheet, one script (plain JavaScript, charts drawn as
//! SVG by our own code), an icon. Nothing is fetched from elsewhere at run time.

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const CONSOLE_CSS: &str = include_str!("../assets/console.css");
const CONSOLE_JS: &str = include_str!("../assets/console.js");
const ICON_SVG: &str = include_str!("../assets/icon.svg");

fn file(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The static routes (state-free).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { file(INDEX_HTML, "text/html; charset=utf-8") }))
        .route("/console.css", get(|| async { file(CONSOLE_CSS, "text/css; charset=utf-8") }))
        .route("/console.js", get(|| async { file(CONSOLE_JS, "text/javascript; charset=utf-8") }))
        .route("/icon.svg", get(|| async { file(ICON_SVG, "image/svg+xml") }))
}
