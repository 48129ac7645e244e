//! Parsing of the derive input: `#[shardwise(...)]` attributes and the
//! struct's fields.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, GenericParam, Ident, LitStr, Path, Type};

/// How a derived row type finds its columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Columns are matched to fields by name, in any order.
    ByName,
    /// Columns are matched to fields by position; names are not checked.
    InOrder,
}

/// The struct-level `#[shardwise(...)]` attributes.
pub(crate) struct StructAttrs {
    /// Path of the protocol crate in generated code.
    pub krate: Path,
    /// Column and bind-marker matching of `DeserializeRow` and
    /// `SerializeValues`.
    pub flavor: Flavor,
    /// Where `flavor` was given, if it was.
    pub flavor_span: Option<Span>,
    /// `#[shardwise(skip_name_checks)]`, where it was given.
    pub skip_name_checks: Option<Span>,
    /// `#[shardwise(forbid_excess_udt_fields)]`, where it was given
    /// (`DeserializeValue` only).
    pub forbid_excess_udt_fields: Option<Span>,
}

/// One named field of the struct.
pub(crate) struct Field {
    /// The field's identifier.
    pub ident: Ident,
    /// The field's type.
    pub ty: Type,
    /// Column or bind-marker name: the field name (without `r#`) unless
    /// renamed.
    pub name: String,
    /// `#[shardwise(skip)]`.
    pub skip: bool,
    /// `#[shardwise(flatten)]`, where it was given: the field's type
    /// contributes its own fields.
    pub flatten: Option<Span>,
    /// `#[shardwise(default_when_null)]`, where it was given: a null reads
    /// as `Default::default()`.
    pub default_when_null: Option<Span>,
    /// `#[shardwise(allow_missing)]`, where it was given: a UDT without the
    /// field reads it as `Default::default()`.
    pub allow_missing: Option<Span>,
}

/// A parsed derive input.
pub(crate) struct Input<'a> {
    /// The whole input.
    pub ast: &'a DeriveInput,
    /// Struct attributes.
    pub attrs: StructAttrs,
    /// All fields, in declaration order, skipped ones included.
    pub fields: Vec<Field>,
}

impl<'a> Input<'a> {
    /// Parses a struct with named fields; `derive` names the derive in
    /// errors.
    pub fn parse(ast: &'a DeriveInput, derive: &str) -> syn::Result<Self> {
        let named = match &ast.data {
            Data::Struct(s) => match &s.fields {
                Fields::Named(named) => named,
                Fields::Unnamed(f) => {
                    return Err(syn::Error::new(
                        f.span(),
                        format!(
                            "#[derive({derive})] needs a struct with named fields: \
                             the field names are the column names; for positional \
                             values use a tuple"
                        ),
                    ))
                }
                Fields::Unit => {
                    return Err(syn::Error::new(
                        ast.ident.span(),
                        format!("#[derive({derive})] needs a struct with named fields, not a unit struct"),
                    ))
                }
            },
            Data::Enum(e) => {
                return Err(syn::Error::new(
                    e.enum_token.span,
                    format!("#[derive({derive})] supports only structs with named fields, not enums"),
                ))
            }
            Data::Union(u) => {
                return Err(syn::Error::new(
                    u.union_token.span,
                    format!("#[derive({derive})] supports only structs with named fields, not unions"),
                ))
            }
        };
        let attrs = parse_struct_attrs(ast)?;
        if let (Some(span), false) = (attrs.forbid_excess_udt_fields, derive == "DeserializeValue") {
            return Err(syn::Error::new(
                span,
                format!(
                    "`forbid_excess_udt_fields` applies to #[derive(DeserializeValue)] (a UDT value read into \
                     the struct), not to #[derive({derive})]"
                ),
            ));
        }
        let mut fields = Vec::with_capacity(named.named.len());
        let mut names = HashSet::new();
        for f in &named.named {
            let Some(ident) = f.ident.clone() else {
                return Err(syn::Error::new(f.span(), "expected a named field"));
            };
            let mut skip = false;
            let mut rename: Option<LitStr> = None;
            let (mut flatten, mut default_when_null, mut allow_missing) = (None, None, None);
            for attr in f.attrs.iter().filter(|a| a.path().is_ident("shardwise")) {
                attr.parse_nested_meta(|meta| {
                    let span = meta.path.span();
                    if meta.path.is_ident("skip") {
                        skip = true;
                    } else if meta.path.is_ident("rename") {
                        rename = Some(meta.value()?.parse()?);
                    } else if meta.path.is_ident("flatten") {
                        flatten = Some(span);
                    } else if meta.path.is_ident("default_when_null") {
                        default_when_null = Some(span);
                    } else if meta.path.is_ident("allow_missing") {
                        allow_missing = Some(span);
                    } else if meta.path.is_ident("skip_name_checks") || meta.path.is_ident("flavor") {
                        return Err(
                            meta.error("`skip_name_checks` and `flavor` are struct attributes: put them on the struct")
                        );
                    } else {
                        return Err(meta.error(
                            "unknown field attribute: expected `skip`, `rename = \"column\"`, `flatten`, \
                             `default_when_null` or `allow_missing`",
                        ));
                    }
                    Ok(())
                })?;
            }
            if let (Some(lit), Some(_)) = (&rename, flatten) {
                return Err(syn::Error::new(
                    lit.span(),
                    "`rename` and `flatten` do not go together: a flattened field has no name of its own, \
                     its type's fields have theirs",
                ));
            }
            if let (Some(_), Some(span)) = (flatten, default_when_null.or(allow_missing)) {
                return Err(syn::Error::new(
                    span,
                    "`default_when_null` and `allow_missing` apply to one column or UDT field, \
                     not to a flattened field (put them on the flattened type's fields)",
                ));
            }
            if let (Some(_), Some(lit)) = (attrs.skip_name_checks, &rename) {
                return Err(syn::Error::new(
                    lit.span(),
                    "`rename` means nothing with `skip_name_checks`: names are not compared",
                ));
            }
            let (name, span) = match &rename {
                Some(lit) => (lit.value(), lit.span()),
                None => (ident.unraw().to_string(), ident.span()),
            };
            if !skip && flatten.is_none() && !names.insert(name.clone()) {
                return Err(syn::Error::new(span, format!("two fields use the column name `{name}`")));
            }
            fields.push(Field { ident, ty: f.ty.clone(), name, skip, flatten, default_when_null, allow_missing });
        }
        Ok(Input { ast, attrs, fields })
    }

    /// The fields that are not skipped.
    pub fn active(&self) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(|f| !f.skip)
    }

    /// A compile error at the first field (not skipped) with the attribute
    /// that `which` picks, saying `why` the derive refuses it.
    pub fn refuse(&self, which: impl Fn(&Field) -> Option<Span>, why: &str) -> syn::Result<()> {
        match self.active().find_map(which) {
            Some(span) => Err(syn::Error::new(span, why)),
            None => Ok(()),
        }
    }

    /// For `SerializeValues` and `DeserializeRow`: `skip_name_checks` needs
    /// `flavor = "in_order"`.
    pub fn check_skip_name_checks(&self) -> syn::Result<()> {
        match (self.attrs.skip_name_checks, self.attrs.flavor) {
            (Some(span), Flavor::ByName) => Err(syn::Error::new(
                span,
                "`skip_name_checks` needs `#[shardwise(flavor = \"in_order\")]`: by name, names are what is matched",
            )),
            _ => Ok(()),
        }
    }

    /// Whether `ty` mentions a type or const parameter of the struct, so
    /// that its trait bound must go into the impl's where clause. (Bounds
    /// on types with only lifetimes, like `&'a str: Trait<'a>`, are left
    /// out: the impls decide, and such bounds can be ambiguous.)
    pub fn is_generic(&self, ty: &Type) -> bool {
        let params: HashSet<String> = self
            .ast
            .generics
            .params
            .iter()
            .filter_map(|p| match p {
                GenericParam::Type(t) => Some(t.ident.to_string()),
                GenericParam::Const(c) => Some(c.ident.to_string()),
                GenericParam::Lifetime(_) => None,
            })
            .collect();
        !params.is_empty() && mentions(quote::quote!(#ty), &params)
    }
}

/// Whether `tokens` contain one of the identifiers `idents` (not as a
/// lifetime).
fn mentions(tokens: TokenStream, idents: &HashSet<String>) -> bool {
    let mut after_quote = false;
    for tt in tokens {
        match tt {
            TokenTree::Group(g) => {
                if mentions(g.stream(), idents) {
                    return true;
                }
                after_quote = false;
            }
            TokenTree::Ident(i) => {
                if !after_quote && idents.contains(&i.to_string()) {
                    return true;
                }
                after_quote = false;
            }
            TokenTree::Punct(p) => after_quote = p.as_char() == '\'',
            TokenTree::Literal(_) => after_quote = false,
        }
    }
    false
}

/// `tokens` with every lifetime named in `from` replaced by `to`.
pub(crate) fn replace_lifetimes(tokens: TokenStream, from: &HashSet<String>, to: &syn::Lifetime) -> TokenStream {
    let mut out = Vec::new();
    let mut iter = tokens.into_iter().peekable();
    while let Some(tt) = iter.next() {
        match tt {
            TokenTree::Group(g) => {
                let mut group = proc_macro2::Group::new(g.delimiter(), replace_lifetimes(g.stream(), from, to));
                group.set_span(g.span());
                out.push(TokenTree::Group(group));
            }
            TokenTree::Punct(p) if p.as_char() == '\'' => match iter.peek() {
                Some(TokenTree::Ident(i)) if from.contains(&i.to_string()) => {
                    iter.next();
                    out.extend(quote::quote!(#to));
                }
                _ => out.push(TokenTree::Punct(p)),
            },
            tt => out.push(tt),
        }
    }
    out.into_iter().collect()
}

pub(crate) fn parse_struct_attrs(ast: &DeriveInput) -> syn::Result<StructAttrs> {
    let mut krate: Option<Path> = None;
    let mut flavor = Flavor::ByName;
    let mut flavor_span = None;
    let mut skip_name_checks = None;
    let mut forbid_excess_udt_fields = None;
    for attr in ast.attrs.iter().filter(|a| a.path().is_ident("shardwise")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let value = meta.value()?;
                // `crate = "path"`, or an unquoted `crate = path`.
                krate = Some(if value.peek(LitStr) { value.parse::<LitStr>()?.parse()? } else { value.parse()? });
                Ok(())
            } else if meta.path.is_ident("flavor") {
                let lit: LitStr = meta.value()?.parse()?;
                flavor_span = Some(lit.span());
                flavor = match lit.value().as_str() {
                    "by_name" => Flavor::ByName,
                    "in_order" => Flavor::InOrder,
                    _ => {
                        return Err(syn::Error::new(lit.span(), "unknown flavor: expected \"by_name\" or \"in_order\""))
                    }
                };
                Ok(())
            } else if meta.path.is_ident("skip_name_checks") {
                skip_name_checks = Some(meta.path.span());
                Ok(())
            } else if meta.path.is_ident("forbid_excess_udt_fields") {
                forbid_excess_udt_fields = Some(meta.path.span());
                Ok(())
            } else if ["skip", "rename", "flatten", "default_when_null", "allow_missing"]
                .iter()
                .any(|a| meta.path.is_ident(a))
            {
                Err(meta.error(
                    "`skip`, `rename`, `flatten`, `default_when_null` and `allow_missing` are field \
                     attributes: put them on a field",
                ))
            } else {
                Err(meta.error(
                    "unknown attribute: expected `crate = \"path\"`, `flavor = \"in_order\"`, `skip_name_checks` \
                     or `forbid_excess_udt_fields`",
                ))
            }
        })?;
    }
    let krate = match krate {
        Some(k) => k,
        None => default_crate_path()?,
    };
    Ok(StructAttrs { krate, flavor, flavor_span, skip_name_checks, forbid_excess_udt_fields })
}

/// The protocol crate as the deriving crate reaches it, read from its
/// `Cargo.toml` (see [`crate::manifest`]); a compile error asking for
/// `#[shardwise(crate = "...")]` when it cannot be found.
fn default_crate_path() -> syn::Result<Path> {
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return Err(crate_path_error("CARGO_MANIFEST_DIR is not set (not built by cargo)"));
    };
    let path = crate::manifest::find_protocol_path(std::path::Path::new(&dir)).map_err(|why| crate_path_error(&why))?;
    syn::parse_str::<Path>(&format!("::{path}")).map_err(|e| crate_path_error(&format!("`::{path}` is no path: {e}")))
}

fn crate_path_error(why: &str) -> syn::Error {
    syn::Error::new(
        Span::call_site(),
        format!(
            "cannot find the shardwise crates: {why}; name the protocol crate with \
             #[shardwise(crate = \"...\")], e.g. #[shardwise(crate = \"::shardwise::protocol\")] \
             or #[shardwise(crate = \"::shardwise_protocol\")]"
        ),
    )
}

/// A string literal token for `s`, spanned at the call site.
pub(crate) fn lit(s: &str) -> LitStr {
    LitStr::new(s, Span::call_site())
}
