//! `#[derive(SerializeValues)]`: bind markers matched by name (the
//! default) or by position (`flavor = "in_order"`), with
//! `#[shardwise(flatten)]` fields contributing their own values.
//!
//! By name, the struct also implements `derived::ValuesByName`, and the
//! checks and the writing in the markers' order are that trait's generic
//! functions; in order, it implements `derived::ValuesInOrder`. A flattened
//! field's type must implement the trait of its parent's flavor.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_quote, DeriveInput, Index, WhereClause};

use crate::attrs::{lit, Field, Flavor, Input};

/// `ast`'s where clause, with each sent field of a generic type bound by
/// `SerializeValue` (the `ser` module's path), or by `flat` for flattened
/// fields.
pub(crate) fn serializable(ast: &DeriveInput, input: &Input, ser: &TokenStream, flat: &TokenStream) -> WhereClause {
    let (_, _, where_clause) = ast.generics.split_for_impl();
    let mut where_clause: WhereClause = where_clause.cloned().unwrap_or_else(|| parse_quote!(where));
    for f in input.active().filter(|f| input.is_generic(&f.ty)) {
        let ty = &f.ty;
        where_clause.predicates.push(if f.flatten.is_some() {
            parse_quote!(#ty: #flat)
        } else {
            parse_quote!(#ty: #ser::SerializeValue)
        });
    }
    where_clause
}

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "SerializeValues")?;
    input.check_skip_name_checks()?;
    input.refuse(
        |f| f.allow_missing,
        "`allow_missing` applies to #[derive(DeserializeValue)] (a UDT without the field): \
         every bind marker of a statement needs a value, and every value a marker",
    )?;
    // `default_when_null` is for reading: accepted and ignored here, as by
    // the official driver, so that one struct can derive both ways.
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let derived = quote!(#krate::types::derived);
    let name = &ast.ident;
    let (impl_generics, ty_generics, _) = ast.generics.split_for_impl();
    let flat_trait = match input.attrs.flavor {
        Flavor::ByName => quote!(#derived::ValuesByName),
        Flavor::InOrder => quote!(#derived::ValuesInOrder),
    };
    let where_clause = serializable(ast, &input, &ser, &flat_trait);

    let fields: Vec<_> = input.active().collect();
    let named = fields.iter().filter(|f| f.flatten.is_none()).count();
    let counts = fields.iter().filter(|f| f.flatten.is_some()).map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> + <#ty as #ser::SerializeValues>::count(&self.#ident))
    });
    let lens = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        let tr = if f.flatten.is_some() { quote!(SerializeValues) } else { quote!(SerializeValue) };
        quote_spanned!(ty.span()=> .saturating_add(<#ty as #ser::#tr>::encoded_len(&self.#ident)?))
    });
    let encodes = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        let tr = if f.flatten.is_some() { quote!(SerializeValues) } else { quote!(SerializeValue) };
        quote_spanned!(ty.span()=> <#ty as #ser::#tr>::encode(&self.#ident, __buf);)
    });
    let buf = if fields.is_empty() { format_ident!("_buf") } else { format_ident!("__buf") };

    let (check_types, encode_for, helper_impl) = match input.attrs.flavor {
        Flavor::ByName => (
            quote!(#derived::check_by_name(self, specs)),
            quote! {
                fn encode_for(&self, specs: &[#krate::types::ColumnSpec], buf: &mut impl #krate::bytes::BufMut) {
                    #derived::encode_by_name(self, specs, buf)
                }
                fn by_name(&self) -> bool {
                    true
                }
            },
            by_name(&input, &fields),
        ),
        Flavor::InOrder => {
            (quote!(#derived::ValuesInOrder::check_in_order(self, specs)), quote!(), in_order(&input, &fields))
        }
    };

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #ser::SerializeValues for #name #ty_generics #where_clause {
            fn count(&self) -> usize {
                #named #(#counts)*
            }
            fn with_names(&self) -> bool {
                false
            }
            fn check_types(
                &self,
                specs: &[#krate::types::ColumnSpec],
            ) -> ::core::result::Result<(), #krate::EncodeError> {
                #check_types
            }
            fn encoded_len(&self) -> ::core::result::Result<usize, #krate::EncodeError> {
                ::core::result::Result::Ok(0usize #(#lens)*)
            }
            fn encode(&self, #buf: &mut impl #krate::bytes::BufMut) {
                #(#encodes)*
            }
            #encode_for
        }

        #[automatically_derived]
        #[allow(unused_variables)]
        impl #impl_generics #flat_trait for #name #ty_generics #where_clause {
            #helper_impl
        }
    })
}

/// The body of `derived::ValuesByName` for a struct matched to the bind
/// markers by name: each marker takes the field of its name, or a
/// flattened field's value of its name.
fn by_name(input: &Input<'_>, fields: &[&Field]) -> TokenStream {
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let derived = quote!(#krate::types::derived);
    let own: Vec<&Field> = fields.iter().copied().filter(|f| f.flatten.is_none()).collect();
    let flat: Vec<&Field> = fields.iter().copied().filter(|f| f.flatten.is_some()).collect();
    let n = own.len();
    let names: Vec<_> = own.iter().map(|f| lit(&f.name)).collect();
    let indexes: Vec<_> = (0..n).collect();
    let flat_types: Vec<_> = flat.iter().map(|f| &f.ty).collect();
    let flat_idents: Vec<_> = flat.iter().map(|f| &f.ident).collect();
    let flat_seen: Vec<Index> = (1..=flat.len()).map(Index::from).collect();
    let vbn = |ty: &syn::Type| quote_spanned!(ty.span()=> <#ty as #derived::ValuesByName>);
    let flat_vbn: Vec<_> = flat_types.iter().map(|ty| vbn(ty)).collect();

    let mark_flat = quote! {
        #(
            let __m = #flat_vbn::mark(name, &mut seen.#flat_seen);
            if __m != #derived::NameMatch::NotMine {
                return __m;
            }
        )*
        #derived::NameMatch::NotMine
    };
    let mark = if n == 0 {
        quote!(#mark_flat)
    } else {
        quote! {
            let __i: usize = match name {
                #(#names => #indexes,)*
                _ => return { #mark_flat },
            };
            #derived::mark_seen(&mut seen.0, __i)
        }
    };
    let checks = own.iter().map(|f| {
        let (ty, ident, name) = (&f.ty, &f.ident, lit(&f.name));
        quote_spanned! {ty.span()=>
            #name => {
                <#ty as #ser::SerializeValue>::check_type(&self.#ident, &spec.typ)
                    .map_err(|e| #derived::in_marker(e, spec))?;
                ::core::result::Result::Ok(true)
            }
        }
    });
    let encodes = own.iter().map(|f| {
        let (ty, ident, name) = (&f.ty, &f.ident, lit(&f.name));
        quote_spanned! {ty.span()=>
            #name => {
                <#ty as #ser::SerializeValue>::encode(&self.#ident, buf);
                true
            }
        }
    });
    quote! {
        type Seen = ([bool; #n], #(#flat_vbn::Seen,)*);
        fn new_seen() -> Self::Seen {
            ([false; #n], #(#flat_vbn::new_seen(),)*)
        }
        fn mark(name: &str, seen: &mut Self::Seen) -> #derived::NameMatch {
            #mark
        }
        fn check_named(
            &self,
            spec: &#krate::types::ColumnSpec,
        ) -> ::core::result::Result<bool, #krate::EncodeError> {
            match spec.name.as_str() {
                #(#checks)*
                _ => {
                    #(
                        if #flat_vbn::check_named(&self.#flat_idents, spec)? {
                            return ::core::result::Result::Ok(true);
                        }
                    )*
                    ::core::result::Result::Ok(false)
                }
            }
        }
        fn unseen(seen: &Self::Seen) -> ::core::option::Option<&'static str> {
            const __NAMES: [&str; #n] = [#(#names),*];
            for (__name, __found) in __NAMES.iter().zip(seen.0.iter()) {
                if !*__found {
                    return ::core::option::Option::Some(__name);
                }
            }
            #(
                if let ::core::option::Option::Some(__name) = #flat_vbn::unseen(&seen.#flat_seen) {
                    return ::core::option::Option::Some(__name);
                }
            )*
            ::core::option::Option::None
        }
        fn encode_named(&self, name: &str, buf: &mut impl #krate::bytes::BufMut) -> bool {
            match name {
                #(#encodes)*
                _ => false #(|| #flat_vbn::encode_named(&self.#flat_idents, name, buf))*,
            }
        }
    }
}

/// The body of `derived::ValuesInOrder` for a struct whose fields are the
/// bind markers in order (a flattened field takes as many markers as it has
/// values): the count and each field's type; names are not matched, but a
/// struct whose fields carry the markers' names in another order is refused
/// (unless `skip_name_checks`).
fn in_order(input: &Input<'_>, fields: &[&Field]) -> TokenStream {
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let derived = quote!(#krate::types::derived);
    let name = &input.ast.ident;
    if fields.is_empty() {
        return quote! {
            fn check_in_order(
                &self,
                specs: &[#krate::types::ColumnSpec],
            ) -> ::core::result::Result<(), #krate::EncodeError> {
                if specs.is_empty() {
                    ::core::result::Result::Ok(())
                } else {
                    ::core::result::Result::Err(#derived::marker_count_mismatch())
                }
            }
        };
    }
    let positions: Vec<_> = (0..fields.len()).map(|i| format_ident!("__p{}", i)).collect();
    let counts: Vec<_> = (0..fields.len()).map(|i| format_ident!("__n{}", i)).collect();
    let layout = fields.iter().zip(positions.iter().zip(&counts)).map(|(f, (p, n))| {
        let (ty, ident) = (&f.ty, &f.ident);
        if f.flatten.is_some() {
            quote_spanned! {ty.span()=>
                let #n = <#ty as #ser::SerializeValues>::count(&self.#ident);
                let #p = __at;
                __at = __at.saturating_add(#n);
            }
        } else {
            quote! {
                let #p = __at;
                __at = __at.saturating_add(1);
            }
        }
    });
    let checks = fields.iter().zip(positions.iter().zip(&counts)).map(|(f, (p, n))| {
        let (ty, ident) = (&f.ty, &f.ident);
        if f.flatten.is_some() {
            quote_spanned! {ty.span()=>
                <#ty as #derived::ValuesInOrder>::check_in_order(&self.#ident, #derived::markers_at(specs, #p, #n)?)?;
            }
        } else {
            quote_spanned! {ty.span()=>
                let __spec = specs.get(#p).ok_or_else(#derived::marker_count_mismatch)?;
                <#ty as #ser::SerializeValue>::check_type(&self.#ident, &__spec.typ)
                    .map_err(|e| #derived::in_marker(e, __spec))?;
            }
        }
    });
    // Values are sent in field order: a struct whose fields carry the bind
    // markers' names in another order is almost surely a mistake.
    let own: Vec<_> = fields.iter().zip(&positions).filter(|(f, _)| f.flatten.is_none()).collect();
    let order_check = (own.len() >= 2 && input.attrs.skip_name_checks.is_none()).then(|| {
        let names: Vec<_> = own.iter().map(|(f, _)| lit(&f.name)).collect();
        let own_positions: Vec<_> = own.iter().map(|(_, p)| p).collect();
        let n = own.len();
        let what = lit(&format!("bind values from struct `{name}`"));
        let field_list: Vec<_> = own.iter().map(|(f, _)| f.name.as_str()).collect();
        let reason = lit(&format!(
            "the fields match the bind markers by name but not in order, and \
             flavor = \"in_order\" sends them in field order (fields: {}; \
             #[shardwise(skip_name_checks)] allows it)",
            field_list.join(", ")
        ));
        quote! {
            const __NAMES: [&str; #n] = [#(#names),*];
            let __misplaced = [#((#own_positions, #names)),*]
                .iter()
                .any(|(__p, __n)| specs.get(*__p).is_some_and(|__s| __s.name != *__n));
            if __misplaced && __NAMES.iter().all(|__n| specs.iter().any(|__s| __s.name == *__n)) {
                return ::core::result::Result::Err(#krate::EncodeError::InvalidValue {
                    what: #what,
                    reason: #reason,
                });
            }
        }
    });
    quote! {
        fn check_in_order(
            &self,
            specs: &[#krate::types::ColumnSpec],
        ) -> ::core::result::Result<(), #krate::EncodeError> {
            let mut __at = 0usize;
            #(#layout)*
            if __at != specs.len() {
                return ::core::result::Result::Err(#derived::marker_count_mismatch());
            }
            #order_check
            #(#checks)*
            ::core::result::Result::Ok(())
        }
    }
}
