//! `#[derive(SerializeValues)]`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_quote, DeriveInput, WhereClause};

use crate::attrs::{lit, Input};

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "SerializeValues")?;
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let name = &ast.ident;
    let (impl_generics, ty_generics, where_clause) = ast.generics.split_for_impl();
    let mut where_clause: WhereClause = where_clause.cloned().unwrap_or_else(|| parse_quote!(where));
    for f in input.active().filter(|f| input.is_generic(&f.ty)) {
        let ty = &f.ty;
        where_clause.predicates.push(parse_quote!(#ty: #ser::SerializeValue));
    }

    let fields: Vec<_> = input.active().collect();
    let n = fields.len();
    let specs: Vec<_> = (0..n).map(|i| format_ident!("__spec{}", i)).collect();
    let names: Vec<_> = fields.iter().map(|f| lit(&f.name)).collect();
    let checks = fields.iter().zip(&specs).map(|(f, spec)| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned! {ty.span()=>
            <#ty as #ser::SerializeValue>::check_type(&self.#ident, &#spec.typ)
                .map_err(|e| __in_marker(e, #spec))?;
        }
    });
    let lens = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> .saturating_add(<#ty as #ser::SerializeValue>::encoded_len(&self.#ident)?))
    });
    let encodes = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> <#ty as #ser::SerializeValue>::encode(&self.#ident, __buf);)
    });
    let buf = if n == 0 { format_ident!("_buf") } else { format_ident!("__buf") };

    // Values are sent in field order: a struct whose fields carry the bind
    // markers' names in another order is almost surely a mistake.
    let order_check = (n >= 2).then(|| {
        let what = lit(&format!("bind values from struct `{name}`"));
        let field_list: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
        let reason = lit(&format!(
            "the fields match the bind markers by name but not in order; \
             field order must match bind-marker order (fields: {})",
            field_list.join(", ")
        ));
        quote! {
            const __NAMES: [&str; #n] = [#(#names),*];
            if specs.iter().zip(__NAMES).any(|(s, n)| s.name != n)
                && __NAMES.iter().all(|n| specs.iter().any(|s| s.name == *n))
            {
                return ::core::result::Result::Err(#krate::EncodeError::InvalidValue {
                    what: #what,
                    reason: #reason,
                });
            }
        }
    });

    let in_marker = (n > 0).then(|| {
        quote! {
                    fn __in_marker(
                        e: #krate::EncodeError,
                        spec: &#krate::types::ColumnSpec,
                    ) -> #krate::EncodeError {
                        match e {
                            #krate::EncodeError::TypeMismatch { rust_type, cql_type } => {
                                #krate::EncodeError::TypeMismatch {
                                    rust_type,
                                    cql_type: ::std::format!("{} (bind marker {})", cql_type, spec.name),
                                }
                            }
                            e => e,
                        }
                    }
        }
    });

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #ser::SerializeValues for #name #ty_generics #where_clause {
            fn count(&self) -> usize {
                #n
            }
            fn with_names(&self) -> bool {
                false
            }
            fn check_types(
                &self,
                specs: &[#krate::types::ColumnSpec],
            ) -> ::core::result::Result<(), #krate::EncodeError> {
                #in_marker
                let [#(#specs),*] = specs else {
                    return ::core::result::Result::Err(#krate::EncodeError::InvalidValue {
                        what: "bind values",
                        reason: "the number of values differs from the number of bind markers",
                    });
                };
                #order_check
                #(#checks)*
                ::core::result::Result::Ok(())
            }
            fn encoded_len(&self) -> ::core::result::Result<usize, #krate::EncodeError> {
                ::core::result::Result::Ok(0usize #(#lens)*)
            }
            fn encode(&self, #buf: &mut impl #krate::bytes::BufMut) {
                #(#encodes)*
            }
        }
    })
}
