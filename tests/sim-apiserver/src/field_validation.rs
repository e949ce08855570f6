//! `fieldValidation`: what a write over HTTP does with the unknown fields pruned from it, a
//! `Warning` header each (kube-apiserver's default, `Warn`), nothing (`Ignore`), or a 400
//! (`Strict`). The request's choice is kept for the task that handles it, so that the store's
//! admission reports pruned fields without every write carrying the request's options; writes
//! through the test API have none, and their unknown fields are pruned silently.

use std::cell::RefCell;
use std::future::Future;

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// Reports the unknown fields a write dropped, as its `fieldValidation` asks: a `Warning`
/// each (the default), nothing (`Ignore`), or (`Strict`) kube-apiserver's 400.
pub(crate) fn report_unknown_fields(def: &ResourceDef, unknown: &[String]) -> Result<(), ApiError> {
    if unknown.is_empty() || !unknown_fields_refused(unknown) {
        return Ok(());
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field {u:?}"))
        .collect();
    Err(ApiError::bad_request(format!(
        "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
        list.join(", "),
        kind = def.kind,
        version = def.version,
    )))
}

/// What a write request's `fieldValidation` asks for unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    /// Pruned silently.
    Ignore,
    /// Pruned, with a `Warning` header each (kube-apiserver's default).
    Warn,
    /// Refused: 400 `strict decoding error`.
    Strict,
}

#[derive(Debug)]
struct FieldCheck {
    mode: FieldValidation,
    warnings: Vec<String>,
}

tokio::task_local! {
    /// The `fieldValidation` of the write request being handled on this task (writes through
    /// the test API have none: unknown fields are pruned silently).
    static FIELD_VALIDATION: RefCell<FieldCheck>;
}

/// Whether unknown fields make the write fail (`Strict`); with `Warn` they are recorded for
/// the response's `Warning` headers.
fn unknown_fields_refused(unknown: &[String]) -> bool {
    FIELD_VALIDATION
        .try_with(|c| {
            let mut c = c.borrow_mut();
            match c.mode {
                FieldValidation::Strict => true,
                FieldValidation::Warn => {
                    for u in unknown {
                        let w = format!("unknown field {u:?}");
                        if !c.warnings.contains(&w) {
                            c.warnings.push(w);
                        }
                    }
                    false
                }
                FieldValidation::Ignore => false,
            }
        })
        .unwrap_or(false)
}

/// Runs the write `write` under the `fieldValidation` of its `query` (`Strict`, `Warn` — the
/// default —, `Ignore`); gives its result and the warnings to send as `Warning` headers.
pub(crate) async fn with_field_validation<F: Future>(
    query: Option<&str>,
    write: F,
) -> (F::Output, Vec<String>) {
    let mut mode = FieldValidation::Warn;
    for (k, v) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if k == "fieldValidation" {
            mode = match v.as_ref() {
                "Strict" => FieldValidation::Strict,
                "Ignore" => FieldValidation::Ignore,
                _ => FieldValidation::Warn,
            };
        }
    }
    let check = RefCell::new(FieldCheck {
        mode,
        warnings: Vec::new(),
    });
    FIELD_VALIDATION
        .scope(check, async move {
            let out = write.await;
            let warnings = FIELD_VALIDATION.with(|c| std::mem::take(&mut c.borrow_mut().warnings));
            (out, warnings)
        })
        .await
}
